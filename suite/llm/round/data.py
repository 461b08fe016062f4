"""The round's LLM datasets in their official formats, from the file the user brings.

* ``json-records`` (llama3.1-8b's ``cnn_eval.json``): a JSON list of objects;
* ``pandas-pickle`` (llama2-70b's ``open_orca_gpt4_tokenized_llama.sampled_24576.pkl``): a
  pickled pandas DataFrame. A pickle can run code when it is loaded, so it is read by an
  unpickler that admits only the pandas and numpy classes a DataFrame is made of;
  anything else is refused, naming what the file asked for.

* ``parquet`` (gpt-oss-120b's ``perf_eval_ref.parquet`` and ``acc_eval_inputs.parquet``):
  read by pandas (the ``pyarrow`` or ``fastparquet`` engine; the ``reasoning`` extra).

The reasoning LLMs' files (deepseek-r1's pickle, gpt-oss-120b's parquet) also name each
sample's sub-dataset (``subset_field``: ``dataset``); their ground truth (``reference_field``:
``ground_truth``) may be a number (an AIME answer), read as its text, or missing (no ground
truth: such a sample is scored wrong, as the reference scores it).

Each record must have the card's prompt, token-id and reference fields; a missing field,
a wrong shape or an empty file is one ``DatasetError`` naming the file, the record and the
field. The file's SHA-256 is computed once; the parsed records are cached under it (token
ids as one int32 array with offsets, texts as JSON), so a second run reads arrays, not a
100 MB JSON or a pickle.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import DatasetError
from suite.paths import install_hint

_HINT = "give the official file (see docs/llm-round.md) with --dataset-path"

#: What a pandas DataFrame pickle may name: pandas' internals and numpy's array types.
_ALLOWED_PREFIXES = ("pandas.core.", "pandas._libs.", "pandas.core.indexes.")
_ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"), ("numpy.core.numeric", "_frombuffer"),
            ("numpy._core.numeric", "_frombuffer"), ("builtins", "slice"),
            ("_codecs", "encode"), ("copyreg", "_reconstructor"), ("builtins", "object")}
#: pandas >= 3 names its public classes (DataFrame, Index, StringDtype...) from these.
_CLASS_MODULES = ("pandas", "pandas.arrays")


class _ArrowColumns(DatasetError):
    """A DataFrame pickle whose columns need pyarrow (see ``find_class``); ``load``
    names the file."""


class _DataFrameUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if ((module, name) in _ALLOWED or module.startswith(_ALLOWED_PREFIXES)
                or (module in _CLASS_MODULES and name[:1].isupper())):
            return super().find_class(module, name)
        if module.split(".")[0] == "pyarrow":
            # What it is, not a threat: pandas >= 3 stores text columns in pyarrow where
            # pyarrow is installed, and pyarrow's classes are not admitted here.
            raise _ArrowColumns(
                f"a DataFrame whose columns are pyarrow arrays (it names {module}."
                f"{name}: pandas 3 stores text so where pyarrow is installed); this reader "
                "admits numpy-backed columns only: save it again after "
                "pd.set_option('future.infer_string', False), or give the official file")
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a pandas DataFrame "
                                     "does not need (refused: unpickling can run code)")


@dataclass
class Records:
    """One dataset's prompts (text and, where the file has them, token ids) and references."""

    prompts_text: list[str]
    tokens: list[list[int]] | None
    references: list[str]
    sha256: str
    #: each sample's sub-dataset (reasoning LLMs), or None
    subsets: list[str] | None = None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    """The file's records as dicts (fields not yet checked)."""
    if fmt == "json-records":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not UTF-8 text ({exc.reason})", hint=_HINT) from None
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})",
                               hint=_HINT) from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DatasetError(f"{path}: expected a JSON list of objects (records), found "
                               f"{type(data).__name__}", hint=_HINT)
        return data
    try:
        import pandas as pd
    except ImportError:
        raise DatasetError(f"reading {path} (a pandas pickle) needs pandas",
                           hint="pip install pandas") from None
    if fmt == "parquet":
        return _parquet(pd, path)
    try:
        with path.open("rb") as handle:
            frame = _DataFrameUnpickler(handle).load()
    except _ArrowColumns as exc:
        raise DatasetError(f"{path}: {exc}", hint=_HINT) from None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError,
            ValueError, IndexError) as exc:
        raise DatasetError(f"{path}: not a pandas DataFrame pickle: {exc}", hint=_HINT) from None
    if not isinstance(frame, pd.DataFrame):
        raise DatasetError(f"{path}: the pickle holds a {type(frame).__name__}, not a pandas "
                           "DataFrame", hint=_HINT)
    return [dict(zip(frame.columns, row, strict=True))
            for row in frame.itertuples(index=False, name=None)]


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    """A parquet table's rows as dicts (qwen3.6-27b's BFCL file: ``bfcl``)."""
    try:
        import pandas as pd
    except ImportError:
        raise DatasetError(f"reading {path} (parquet) needs pandas",
                           hint="pip install pandas") from None
    return _parquet(pd, path)


def _parquet(pd: Any, path: Path) -> list[dict[str, Any]]:
    try:
        with warnings.catch_warnings():  # pandas 3 deprecates fastparquet, which still reads
            warnings.filterwarnings("ignore", message=".*fastparquet.*")
            frame = pd.read_parquet(path)
    except ImportError:
        raise DatasetError(f"reading {path} (parquet) needs pyarrow or fastparquet",
                           hint=install_hint("reasoning")) from None
    except Exception as exc:
        raise DatasetError(f"{path}: not a parquet table ({type(exc).__name__}: {exc})",
                           hint=_HINT) from None
    return [dict(zip(frame.columns, row, strict=True))
            for row in frame.itertuples(index=False, name=None)]


def _truth(value: Any) -> str:
    """A reasoning sample's ground truth as text; "" where there is none (NaN, None)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value.item() if isinstance(value, np.generic) else value)


def parse(path: Path, fmt: str, prompt_field: str, tokens_field: str,
          reference_field: str, subset_field: str = "") -> Records:
    """Read and check ``path`` (see the module docstring)."""
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist", hint=_HINT)
    if path.stat().st_size == 0:
        raise DatasetError(f"dataset file {path} is empty", hint=_HINT)
    rows = _rows(path, fmt)
    if not rows:
        raise DatasetError(f"dataset file {path} has no records", hint=_HINT)
    if "," in tokens_field:  # alternatives: the first the file has (gpt-oss-120b's two names)
        tokens_field = next((f for f in tokens_field.split(",") if f in rows[0]),
                            tokens_field.split(",")[0])
    # a reasoning file without ground truth (a performance set) has neither column
    wanted = [f for f in (prompt_field, tokens_field) if f] if subset_field else \
        [f for f in (prompt_field, tokens_field, reference_field) if f]
    texts: list[str] = []
    references: list[str] = []
    tokens: list[list[int]] = []
    subsets: list[str] = []
    for index, row in enumerate(rows):
        missing = [f for f in wanted if f not in row]
        if missing:
            raise DatasetError(f"{path}: record {index} has no field '{missing[0]}' (it has "
                               f"{', '.join(map(str, list(row)[:8]))})", hint=_HINT)
        if subset_field:
            row = {**row, reference_field: _truth(row.get(reference_field))}
            subset = row.get(subset_field, "")
            if not isinstance(subset, str):
                raise DatasetError(f"{path}: record {index}: field '{subset_field}' is "
                                   f"{subset!r}, not a sub-dataset's name", hint=_HINT)
            subsets.append(subset)
        for field in (f for f in (prompt_field, reference_field) if f):
            if not isinstance(row[field], str):
                raise DatasetError(f"{path}: record {index}: field '{field}' is "
                                   f"{type(row[field]).__name__}, not text", hint=_HINT)
        texts.append(row[prompt_field] if prompt_field else "")
        references.append(row[reference_field])
        if tokens_field:
            ids = row[tokens_field]
            ids = ids.tolist() if isinstance(ids, np.ndarray) else ids
            if (not isinstance(ids, list) or not ids
                    or not all(isinstance(i, int | np.integer) and i >= 0 for i in ids)):
                raise DatasetError(f"{path}: record {index}: field '{tokens_field}' is not a "
                                   "non-empty list of token ids", hint=_HINT)
            if (top := max(int(i) for i in ids)) >= 1 << 31:
                # LoadGen's and the engines' token ids are int32: this is no token id.
                raise DatasetError(f"{path}: record {index}: field '{tokens_field}' holds "
                                   f"{top}, which is 2^31 or more: not a token id",
                                   hint=_HINT)
            tokens.append([int(i) for i in ids])
    return Records(texts, tokens if tokens_field else None, references, file_sha256(path),
                   subsets if subset_field else None)


def load(path: Path, fmt: str, prompt_field: str, tokens_field: str, reference_field: str,
         cache_dir: Path | None, subset_field: str = "") -> Records:
    """``parse``, through a cache keyed by the file's SHA-256 and the fields read."""
    if cache_dir is None:
        return parse(path, fmt, prompt_field, tokens_field, reference_field, subset_field)
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist", hint=_HINT)
    sha = file_sha256(path)
    key = hashlib.sha256(json.dumps([sha, fmt, prompt_field, tokens_field, reference_field,
                                     *([subset_field] if subset_field else [])]
                                    ).encode()).hexdigest()[:32]
    arrays, texts = cache_dir / f"{key}.npz", cache_dir / f"{key}.json"
    if arrays.is_file() and texts.is_file():
        try:
            with np.load(arrays, allow_pickle=False) as stored:
                flat, offsets = stored["ids"], stored["offsets"]
            meta = json.loads(texts.read_text(encoding="utf-8"))
            tokens = ([flat[a:b].tolist() for a, b in itertools.pairwise(offsets)]
                      if meta["has_tokens"] else None)
            return Records(meta["prompts"], tokens, meta["references"], sha,
                           meta.get("subsets"))
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache is rebuilt
    records = parse(path, fmt, prompt_field, tokens_field, reference_field, subset_field)
    cache_dir.mkdir(parents=True, exist_ok=True)
    lists = records.tokens or []
    offsets = np.cumsum([0, *(len(t) for t in lists)], dtype=np.int64)
    flat = np.fromiter((i for t in lists for i in t), dtype=np.int32, count=int(offsets[-1]))
    tmp = arrays.with_suffix(".tmp.npz")
    np.savez(tmp, ids=flat, offsets=offsets)
    tmp.replace(arrays)
    texts.write_text(json.dumps({"prompts": records.prompts_text,
                                 "references": records.references,
                                 "has_tokens": records.tokens is not None,
                                 "subsets": records.subsets}), encoding="utf-8")
    return records


#: The MLCommons R2 downloader leaves ``<name>.md5`` lists (``md5sum`` lines) beside what it
#: downloaded and checks them itself; no other checksum of these files is published.
_MD5_LINE = re.compile(r"^([0-9a-fA-F]{32})\s+\*?(.+)$")
_MD5_LIST_LIMIT = 1 << 20


def downloader_checksum(path: Path) -> dict[str, str]:
    """The file's MD5 against a downloader ``.md5`` list beside it, if one names it: a
    mismatch is an error (not the official file); no list says so in the record."""
    for listing in sorted(path.parent.glob("*.md5")):
        try:
            with listing.open("rb") as handle:
                text = handle.read(_MD5_LIST_LIMIT).decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            match = _MD5_LINE.match(line.strip())
            if match is None or Path(match.group(2).strip()).name != path.name:
                continue
            expected = match.group(1).lower()
            digest = hashlib.md5(usedforsecurity=False)
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
            if digest.hexdigest() != expected:
                raise DatasetError(f"{path}: MD5 {digest.hexdigest()} differs from "
                                   f"{listing}'s {expected}: not the official file",
                                   hint="download it again with the MLCommons downloader")
            return {"md5": expected, "md5_verified_by": str(listing)}
    return {"md5_verified_by": "none: no downloader .md5 list beside the file names it"}
