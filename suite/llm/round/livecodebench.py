"""LiveCodeBench's problems and tests, from the files of its Hugging Face dataset.

The round's datasets name a LiveCodeBench problem by its ``question_id`` (the sample's
``ground_truth``); the tests are not in them. The reference loads them with
``datasets.load_dataset("livecodebench/code_generation_lite", version_tag=...)``
(deepseek-r1: ``release_v1``; gpt-oss-120b: ``release_v6``), which reads the dataset
repository's JSON-lines files: ``test.jsonl`` for release_v1, and one more file per release
(``test2.jsonl`` ... ``test6.jsonl`` for release_v6). The suite reads the same files from a
local directory (``git clone https://huggingface.co/datasets/livecodebench/code_generation_lite``),
never downloading them.

Each line has ``question_id``, ``public_test_cases`` and ``private_test_cases`` (JSON lists
of ``{"input", "output", "testtype"}``; the private ones may instead be base64 of a zlib
stream of a pickled JSON string) and ``metadata`` (JSON; ``func_name`` for call-based
problems). The pickle holds one string: it is read by an unpickler that admits no class.
The tests are the public ones, then the private ones, as the reference orders them.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.errors import DatasetError

#: The files of each release the round uses (code_generation_lite's loading script).
RELEASE_FILES = {"release_v1": ("test.jsonl",),
                 "release_v6": ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl",
                                "test5.jsonl", "test6.jsonl")}
_HINT = ("give the directory of livecodebench/code_generation_lite's files (docs/llm-round.md, "
         "'LiveCodeBench tests')")


@dataclass(frozen=True)
class Problem:
    question_id: str
    fn_name: str | None
    tests: list[tuple[str, str]]


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name} (refused: a test list is "
                                     "a string)")


def _private(text: str, where: str) -> list[Any]:
    try:
        return list(json.loads(text))
    except ValueError:
        pass
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("utf-8")))
        inner = _NoClasses(io.BytesIO(raw)).load()
        return list(json.loads(inner))
    except (binascii.Error, zlib.error, pickle.UnpicklingError, EOFError, TypeError,
            ValueError) as exc:
        raise DatasetError(f"{where}: private_test_cases is neither JSON nor a compressed "
                           f"test list ({exc})", hint=_HINT) from None


def _problem(record: dict[str, Any], where: str) -> Problem:
    try:
        tests = [*json.loads(record["public_test_cases"]),
                 *_private(record["private_test_cases"], where)]
        metadata = json.loads(record.get("metadata") or "{}")
        pairs = [(str(t["input"]), str(t["output"])) for t in tests]
        return Problem(str(record["question_id"]), metadata.get("func_name"), pairs)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DatasetError(f"{where}: not a LiveCodeBench problem ({type(exc).__name__}: "
                           f"{exc})", hint=_HINT) from None


def load(directory: Path, release: str) -> dict[str, Problem]:
    """Every problem of ``release`` in ``directory``, by question id."""
    if not directory.is_dir():
        raise DatasetError(f"LiveCodeBench directory {directory} does not exist", hint=_HINT)
    problems: dict[str, Problem] = {}
    for name in RELEASE_FILES[release]:
        path = directory / name
        if not path.is_file():
            raise DatasetError(f"{path} does not exist ({release} reads "
                               f"{', '.join(RELEASE_FILES[release])})", hint=_HINT)
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise DatasetError(f"{path}: line {number} is not JSON ({exc})",
                                       hint=_HINT) from None
                if not isinstance(record, dict):
                    raise DatasetError(f"{path}: line {number} is not a JSON object",
                                       hint=_HINT)
                problem = _problem(record, f"{path}: line {number}")
                problems[problem.question_id] = problem
    return problems
