"""Model cards (``reference_models/<name>/model.toml``) and model-file verification.

A card names the model file, its checksum, the input and output tensors, how to turn
outputs into the response LoadGen logs, and the dataset it is scored on.

Two kinds of model file:

* ``source = "bundled"`` (digits): the file ships in the card's directory; the
  harness refuses to run one whose sha256 differs from the card.
* ``source = "user"`` (resnet50): the user supplies the file (``data.model_path``).
  One whose checksum matches the card is the reference model (closed division); any
  other file still runs, but only in the open division, and every report says so.
  A card may hold the published md5 instead of a sha256 where only that is published.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from suite.errors import ConfigError, ModelError
from suite.paths import Paths


class Kind(StrEnum):
    """What kind of benchmark a card is: what the run pipeline does differently for it.

    A card declares it (``task`` in its ``model.toml``); ``card_kind`` reads it, once per
    run, and every stage that differs by kind asks the kind's strategy
    (``suite.harness.kinds``), never the card again.
    """

    #: Fixed-shape tensors in and out, one ``predict`` per batch (digits, ResNet-50).
    TENSOR = "tensor"
    #: Token streams: TTFT/TPOT, tokens per second (tinylm, the round's LLMs).
    TEXT_GENERATION = "text-generation"


#: A card's ``task`` for each kind that is not ``TENSOR`` (a card without one is a tensor card).
_TASK_KINDS = {"text-generation": Kind.TEXT_GENERATION}

#: A benchmark named ``<card>-interactive`` runs the card ``<card>`` (Interactive is the
#: Server scenario with tighter bounds; the model, dataset and accuracy are the same).
INTERACTIVE_SUFFIX = "-interactive"

#: A benchmark named ``<card>-99``, ``<card>-99.9`` or ``<card>-95`` runs the card ``<card>``:
#: the round's accuracy levels (llama2-70b-99, bert-99.9, yolo-95) share model, dataset, scoring.
_ACCURACY_LEVEL = re.compile(r"-(?:95|99(?:\.9)?)$")


def card_name(benchmark: str) -> str:
    """The card a benchmark runs (``llama2-70b-99.9`` and ``tinylm-interactive`` run the
    ``llama2-70b`` and ``tinylm`` cards); a name without a suffix is its own card."""
    return _ACCURACY_LEVEL.sub("", benchmark.removesuffix(INTERACTIVE_SUFFIX))


def card_kind(paths: Paths, benchmark: str) -> Kind:
    """The kind ``benchmark``'s card declares (its ``task``): the one place that decides.

    A card that cannot be read is a tensor card here: the kind's own card loader then
    reports what is wrong with it, naming the file and key.
    """
    for name in dict.fromkeys((benchmark, card_name(benchmark))):
        path = paths.reference_models / name / "model.toml"
        try:
            task = tomllib.loads(path.read_text(encoding="utf-8")).get("task")
        except (OSError, ValueError):  # missing, not UTF-8, not TOML, an overlong integer
            continue
        if isinstance(task, dict):  # a ``[task]`` table: its ``name`` is the task
            task = task.get("name", "")
        return _TASK_KINDS.get(str(task), Kind.TENSOR)
    return Kind.TENSOR


class _Card(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)  # built when used


class ModelFiles(_Card):
    onnx_file: str
    source: Literal["bundled", "user"] = "bundled"
    onnx_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    #: Published md5 checksums of the reference file(s), where no sha256 is published.
    onnx_md5: list[str] = []
    opset: int | None = None
    torch_module: str | None = None
    torch_state_dict: str | None = None
    torch_state_dict_sha256: str | None = None
    weights_sha256: str | None = None

    checksum_published: bool = True  # False (whisper): none published, every file runs open

    @model_validator(mode="after")
    def _has_checksum(self) -> ModelFiles:
        if self.onnx_sha256 is None and not self.onnx_md5 and self.checksum_published:
            raise ValueError("a model card needs onnx_sha256 or onnx_md5 (none published: "
                             "checksum_published = false)")
        if self.source == "bundled" and self.onnx_sha256 is None:
            raise ValueError("a bundled model needs onnx_sha256")
        return self


class TensorSpec(_Card):
    name: str
    shape: list[int]
    dtype: str
    layout: str | None = None

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample: the tensor shape without the batch axis."""
        return tuple(self.shape[1:])


class PostprocessSpec(_Card):
    #: ``argmax``: the output is logits or probabilities (N, classes);
    #: ``class_index``: the model already applied argmax, the output is (N,) or (N, 1);
    #: ``task``: a task card's (never written in a card): its task module's response bytes.
    kind: Literal["argmax", "class_index", "task"]
    response_dtype: Literal["int32", "int64", "float32"] = "int32"
    label_offset: int = 0


class DatasetSpec(_Card):
    name: str


class AccuracySpec(_Card):
    #: ``top1`` for a classification card; a task card's is the checker's key (``F1``...).
    metric: str
    unit: str = "percent"
    reference_fp32: float
    closed_target: float | dict[str, float] | None = None  # by benchmark where levels differ


class ModelCard(_Card):
    """A parsed model card; ``directory`` is where its files live.

    A task card (``suite.tasks``) has ``[[inputs]]``/``[[outputs]]`` (every official
    tensor) for ``[input]``/``[output]``/``[postprocess]``: ``input``, ``output`` are its
    first, ``postprocess.kind`` is "task", ``[task_options]`` is ``task_options``.
    """

    schema_version: int
    name: str
    title: str = ""
    task: str = ""
    model: ModelFiles
    input: TensorSpec
    output: TensorSpec
    inputs: list[TensorSpec] = []
    outputs: list[TensorSpec] = []
    postprocess: PostprocessSpec
    dataset: DatasetSpec
    accuracy: AccuracySpec
    task_options: dict[str, Any] = {}
    directory: Path = Path()
    #: The user-supplied model file (``data.model_path``), for ``source = "user"``.
    model_path: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _task_card(cls, data: Any) -> Any:  # a task card in the shape every card has
        if not isinstance(data, dict):
            return data
        if isinstance(table := data.get("task"), dict):  # [task] with its name and options
            options = {k: v for k, v in table.items() if k != "name"}
            data = {**data, "task": str(table.get("name", "")),
                    "task_options": {**options, **data.get("task_options", {})}}
        if "inputs" not in data and "outputs" not in data:
            return {"inputs": [data["input"]] if "input" in data else [],
                    "outputs": [data["output"]] if "output" in data else [], **data}
        for one, many in (("input", "inputs"), ("output", "outputs"), ("postprocess", "")):
            if one in data or (many and not data.get(many)):
                raise ValueError(f"a task card declares [[inputs]] and [[outputs]] (one at "
                                 f"least each), not [{one}]")
            data = {**data, one: data[many][0] if many else {"kind": "task"}}
        return data

    @property
    def is_task_card(self) -> bool:
        return self.postprocess.kind == "task"  # [[inputs]]/[[outputs]]: a suite.tasks module

    @property
    def card_path(self) -> Path:
        return self.directory / "model.toml"

    @property
    def onnx_path(self) -> Path:
        if self.model_path is not None:
            return self.model_path
        return self.directory / self.model.onnx_file

    def with_model_path(self, model_path: str) -> ModelCard:
        """The card with the user's model file; an error names the config key if needed.

        Example::

            card = load_card(paths, "resnet50").with_model_path(config.data.model_path)
        """
        if self.model.source == "bundled":
            if model_path:
                raise ConfigError(
                    f"data.model_path = {model_path!r}: benchmark '{self.name}' ships its "
                    f"model ({self.onnx_path}); it takes no user-supplied file",
                    hint="unset data.model_path for this benchmark",
                )
            return self
        if not model_path:
            raise ModelError(
                f"benchmark '{self.name}' needs its model file ({self.model.onnx_file}); "
                "none is configured",
                hint=f"set data.model_path (--set data.model_path=/path/{self.model.onnx_file}"
                ", a [data] table in --config) or the benchmark's environment variable "
                "(see docs/benchmarks.md)",
            )
        return self.model_copy(update={"model_path": Path(model_path)})


def load_card(paths: Paths, name: str) -> ModelCard:
    """Parse ``reference_models/<card>/model.toml`` for benchmark ``name`` (``bert-99`` runs
    the ``bert`` card: ``card_name``), e.g. ``load_card(find_paths(), "digits")``."""
    named = paths.reference_models / name / "model.toml"
    path = named if named.is_file() else paths.reference_models / card_name(name) / "model.toml"
    if not path.is_file():
        raise ConfigError(
            f"no model card for benchmark '{name}': {path} does not exist",
            hint="every benchmark needs reference_models/<name>/model.toml",
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return ModelCard.model_validate({**data, "directory": path.parent})
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                          hint="a model card is UTF-8 TOML; re-save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"model card {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{path}: {key}: {first['msg']}") from None
    except ValueError:  # int()'s digit limit, which tomllib lets through unwrapped
        raise ConfigError(f"{path}: an integer too long to read (more than "
                          f"{sys.get_int_max_str_digits():,} digits)",
                          hint="fix the card's numbers") from None


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: Remembered digests of model files (``model_digests``), in the state cache.
DIGESTS_FILE = "model_digests.json"
#: A file changed this recently may change again within its timestamps' resolution.
_RACY_S = 2.0


def _state(stat: os.stat_result) -> tuple[int, ...]:
    """What identifies a file's content version: device, inode, size, mtime, ctime (ns)."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def model_digests(path: Path, md5: bool, cache: Path | None = None) -> tuple[str, str, bool]:
    """(sha256, md5 or "", remembered) of a file, read once for both.

    With ``cache`` (a directory), the digests are remembered under the opened file's
    device, inode, size and modification and change times in ns, as git's index remembers
    a file's state: a model file is hashed once, not on every quick run (a 100 MB
    ResNet-50: 0.16 s a run). Any write or ``touch`` changes the change time, which no user
    can set back. The key is the open file's (``fstat``: a symlink repointed meanwhile, or
    attributes a network filesystem cached, cannot pair one file's key with another's
    bytes); a file changed in the 2 s before, or while, it was read is never remembered.
    """
    now = time.time()
    with path.open("rb") as handle:
        stat = os.fstat(handle.fileno())
        key = "|".join(map(str, (path.resolve(), *_state(stat))))
        store = cache / DIGESTS_FILE if cache is not None else None
        known: dict[str, list[str]] = {}
        if store is not None:
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads(store.read_text(encoding="utf-8"))
                known = loaded if isinstance(loaded, dict) else {}
            hit = known.get(key)
            if isinstance(hit, list) and len(hit) == 2 and (hit[1] or not md5):
                return str(hit[0]), str(hit[1]) if md5 else "", True
        sha, md = hashlib.sha256(), hashlib.md5(usedforsecurity=False) if md5 else None
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
            if md is not None:
                md.update(chunk)
        # the state, not the whole stat: reading may move the access time
        unchanged = _state(os.fstat(handle.fileno())) == _state(stat)
    digests = sha.hexdigest(), md.hexdigest() if md is not None else ""
    if store is not None and unchanged and now - max(stat.st_mtime, stat.st_ctime) > _RACY_S:
        known = {k: v for k, v in list(known.items())[-63:] if k != key}  # the newest 64
        known[key] = list(digests)
        tmp = store.with_name(f"{DIGESTS_FILE}.{os.getpid()}.tmp")
        try:  # a read-only cache only costs the next run
            store.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")
            tmp.replace(store)
        except OSError:
            tmp.unlink(missing_ok=True)
    return *digests, False


@dataclass(frozen=True)
class ModelIdentity:
    """What the model file is: its sha256, and the division it may run in."""

    sha256: str
    division: Literal["closed", "open"]
    #: Why the run is open division (empty for closed).
    reason: str = ""
    #: How the sha256 was obtained: "read" (the file hashed now) or "remembered" (the
    #: digest cache, for the same file state: ``model_digests``), or, for weights a
    #: remote engine serves, "stated by the submitter, not verified" (the option's
    #: digest) or "not recorded" (none stated; no local file is hashed for it).
    sha256_source: Literal["read", "remembered", "stated by the submitter, not verified",
                           "not recorded"] = "read"


def check_model(card: ModelCard, cache: Path | None = None) -> ModelIdentity:
    """Verify the card's model file: refuse a bad bundled file, classify a user's one
    (``cache``: where its digests are remembered, see ``model_digests``).

    Example::

        identity = check_model(card)  # ModelIdentity(sha256='…', division='closed')
    """
    path = card.onnx_path
    if card.model.source == "bundled":
        return ModelIdentity(verify_model_file(card), "closed")
    if not path.is_file():
        url = card.model.model_dump().get("url", "see docs/benchmarks.md")
        raise ModelError(
            f"model file {path} does not exist (data.model_path of benchmark '{card.name}')",
            hint=f"download the reference model ({url}) and point data.model_path (or the "
            "benchmark's environment variable) at it",
        )
    try:
        sha, md5, remembered = model_digests(path, bool(card.model.onnx_md5), cache)
    except OSError as exc:
        raise ModelError(f"model file {path} cannot be read: {exc}") from None
    source: Literal["read", "remembered"] = "remembered" if remembered else "read"
    if sha == card.model.onnx_sha256 or md5 in card.model.onnx_md5:
        return ModelIdentity(sha, "closed", sha256_source=source)
    expected = (f"sha256 {card.model.onnx_sha256}" if card.model.onnx_sha256
                else f"md5 {' or '.join(card.model.onnx_md5)}" if card.model.onnx_md5
                else "a checksum nobody has published")
    return ModelIdentity(sha, "open", (
        f"model file {path} is not the reference model of {card.card_path} "
        f"(sha256 {sha}, md5 {md5 or '-'}; the card expects {expected}): "
        "open division only, not a closed-division result"), source)


def verify_model_file(card: ModelCard, path: Path | None = None) -> str:
    """Check a bundled model file against the card; return its sha256 or raise ``ModelError``."""
    path = path or card.onnx_path
    if card.model.onnx_sha256 is None:
        raise ModelError(f"{card.card_path}: no onnx_sha256 to verify {path} against")
    if not path.is_file():
        raise ModelError(
            f"model file {path} is missing (named by {card.card_path})",
            hint="restore it from git (git checkout -- <file>) or retrain with the "
            "benchmark's train.py and update the card",
        )
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise ModelError(f"model file {path} cannot be read: {exc}") from None
    if actual != card.model.onnx_sha256:
        raise ModelError(
            f"model file {path} does not match its model card {card.card_path}: "
            f"sha256 {actual} != expected {card.model.onnx_sha256}",
            hint="the file was modified or replaced; restore the original "
            "(git checkout -- <file>), or if you retrained on purpose, update onnx_sha256 "
            "in the card (such a model is not the reference model)",
        )
    return actual
