"""The preprocessing cache: every image decoded and cropped once, in parallel, resumable.

One cache directory per (dataset, preprocessing parameters, file list), named by a
hash of all three, so a changed parameter or a changed file list gets a fresh
cache and never reads stale crops:

* ``crops.npy``: one memory-mappable uint8 array (N, size, size, 3), created sparse
  with ``np.lib.format.open_memmap`` and filled in place by worker processes;
* ``done.npy``: a bool bitmap, saved after every finished chunk; a row is marked
  done only after its worker flushed it, so an interrupted build resumes where it
  stopped and never trusts a half-written row;
* ``meta.json``: the parameters, the key and ``complete``.

An image that cannot be decoded is reported by name. The build goes on with the
other images (so one pass names every bad file), then fails with a ``DatasetError``;
nothing is ever skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from suite.datasets.preprocess import CropParams, ImageError, decode_and_crop
from suite.errors import DatasetError

#: Called with (images done, images in the dataset, elapsed seconds).
CacheProgress = Callable[[int, int | None, float], None]

_CHUNK = 32  # images per worker task: small enough for a smooth progress bar


@dataclass(frozen=True)
class CacheReport:
    """What ``ensure`` did; recorded in the run directory's ``dataset.json``."""

    directory: str
    key: str
    total: int
    preprocessed: int
    reused: int
    seconds: float
    bytes_per_image: int


def _work(crops_path: str, items: Sequence[tuple[int, str]],
          params: CropParams) -> tuple[list[int], list[str]]:
    """Worker: crop ``items`` into the memmap; return (done rows, error messages)."""
    crops = np.load(crops_path, mmap_mode="r+")
    done: list[int] = []
    errors: list[str] = []
    for row, name in items:
        try:
            crop = decode_and_crop(Path(name), params)
        except ImageError as exc:
            errors.append(str(exc))
            continue
        except Exception as exc:  # an OpenCV failure must name the file, not kill the pool
            errors.append(f"{name}: {exc!r}")
            continue
        crops[row] = crop
        done.append(row)
    crops.flush()
    return done, errors


class CropCache:
    """The cache of one dataset's crops (see the module docstring)."""

    def __init__(self, root: Path, dataset: str, files: Sequence[Path],
                 params: CropParams) -> None:
        self.files = list(files)
        self.params = params
        listing = hashlib.sha256()
        listing.update(params.key().encode())
        for path in self.files:
            # Name and size: a replaced image invalidates the cache, a copy does not.
            listing.update(f"{path.name}\t{path.stat().st_size}\n".encode())
        self.key = listing.hexdigest()
        self.directory = root / f"{dataset}-{self.key[:16]}"
        self.crops_path = self.directory / "crops.npy"
        self.done_path = self.directory / "done.npy"
        self.meta_path = self.directory / "meta.json"

    @property
    def shape(self) -> tuple[int, int, int, int]:
        size = self.params.crop_size
        return (len(self.files), size, size, 3)

    def complete(self) -> bool:
        if not (self.meta_path.is_file() and self.crops_path.is_file()):
            return False
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return False
        return bool(meta.get("complete")) and meta.get("key") == self.key

    def ensure(self, workers: int = 0, progress: CacheProgress | None = None) -> CacheReport:
        """Build whatever is missing; return what was done. Raises ``DatasetError``."""
        start = time.monotonic()
        total = len(self.files)
        if self.complete():
            return self._report(0, total, start)
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.crops_path.is_file():
            np.lib.format.open_memmap(self.crops_path, mode="w+", dtype=np.uint8,
                                      shape=self.shape).flush()
        done = self._load_done(total)
        self._write_meta(complete=False)
        todo = np.flatnonzero(~done)
        reused = total - len(todo)
        errors = self._build(todo, done, workers or os.cpu_count() or 1, progress, start)
        if errors:
            shown = "\n  ".join(errors[:10])
            more = f"\n  … and {len(errors) - 10} more" if len(errors) > 10 else ""
            raise DatasetError(
                f"{len(errors)} image(s) could not be preprocessed:\n  {shown}{more}",
                hint="replace or remove the named files (and their val_map.txt lines); "
                "the images already done stay cached and the next run resumes",
            )
        self._write_meta(complete=True)
        return self._report(total - reused, reused, start)

    def open(self) -> npt.NDArray[np.uint8]:
        """The finished crops, memory-mapped read-only."""
        crops: npt.NDArray[np.uint8] = np.load(self.crops_path, mmap_mode="r")
        if crops.shape != self.shape:
            raise DatasetError(f"{self.crops_path}: shape {crops.shape}, expected {self.shape}",
                               hint=f"delete {self.directory} to rebuild it")
        return crops

    # -- internals ---------------------------------------------------------------------

    def _build(self, todo: npt.NDArray[np.int64], done: npt.NDArray[np.bool_], workers: int,
               progress: CacheProgress | None, start: float) -> list[str]:
        items = [(int(row), str(self.files[row])) for row in todo]
        chunks = [items[i:i + _CHUNK] for i in range(0, len(items), _CHUNK)]
        errors: list[str] = []
        finished = int(done.sum())
        if progress is not None:
            progress(finished, len(done), 0.0)
        if not chunks:
            return errors
        # spawn, not fork: the parent may hold threads (progress display, LoadGen).
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(chunks)),
                                 mp_context=context) as pool:
            pending: set[Future[tuple[list[int], list[str]]]] = {
                pool.submit(_work, str(self.crops_path), chunk, self.params) for chunk in chunks
            }
            try:
                while pending:
                    ready, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in ready:
                        rows, chunk_errors = future.result()
                        done[rows] = True
                        errors.extend(chunk_errors)
                        finished += len(rows) + len(chunk_errors)
                    self._save_done(done)
                    if progress is not None:
                        progress(finished, len(done), time.monotonic() - start)
            except BrokenProcessPool as exc:
                # A decoder crash (or the OOM killer) took a worker down; the rows done
                # so far are saved, so a rerun resumes.
                raise DatasetError(
                    f"a preprocessing worker process died ({exc}); "
                    f"{int(done.sum())} of {len(done)} images are cached in {self.directory}",
                    hint="rerun to resume; if it recurs, lower data.preprocess_workers",
                ) from None
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        return errors

    def _load_done(self, total: int) -> npt.NDArray[np.bool_]:
        if self.done_path.is_file():
            done: npt.NDArray[np.bool_] = np.load(self.done_path)
            if done.shape == (total,) and done.dtype == np.bool_:
                return done
        return np.zeros(total, dtype=np.bool_)

    def _save_done(self, done: npt.NDArray[np.bool_]) -> None:
        tmp = self.done_path.with_name("done.tmp.npy")
        np.save(tmp, done)
        tmp.replace(self.done_path)

    def _write_meta(self, complete: bool) -> None:
        meta = {"key": self.key, "complete": complete, "count": len(self.files),
                "shape": list(self.shape), "dtype": "uint8", "layout": "NHWC RGB",
                "params": asdict(self.params)}
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.meta_path)

    def _report(self, preprocessed: int, reused: int, start: float) -> CacheReport:
        size = self.params.crop_size
        return CacheReport(
            directory=str(self.directory), key=self.key, total=len(self.files),
            preprocessed=preprocessed, reused=reused,
            seconds=round(time.monotonic() - start, 3), bytes_per_image=size * size * 3,
        )
