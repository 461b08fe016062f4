"""qwen3.6-27b's dataset: BFCL v4's single-turn set as the round samples it.

The file the user brings is the reference's ``bfcl_v4_single_turn.parquet`` (mlcommons/
endpoints ``dataset_manager/predefined/bfcl_v4/__init__.py``): one row per BFCL sample,
with the columns

* ``messages``: the chat messages (JSON text, or a list), sent as they are;
* ``tools``: the functions as OpenAI tools (JSON text, or a list), sent in ``tools``;
* ``tool_choice``: ``"auto"`` (sent as it is);
* ``ground_truth``: BFCL's possible answers (JSON text; ``"[]"``: no call expected);
* ``func_description``: BFCL's own function descriptions (JSON text), what the AST
  checker reads the parameters' types and required names from;
* ``subset`` (``simple_python`` ... ``live_irrelevance``) and ``sample_id``.

The round's 995 samples are drawn from it as the reference's example configuration
draws them (``examples/11_Edge_Agentic_Example/online_edge_full_run.yaml``): the subsets
of the categories ``non_live``, ``live`` and ``hallucination`` (``live_relevance`` is in
none), then per subset, in sorted subset order (pandas' ``groupby``), the first
``max(1, int(total * pct / 100))`` rows at the category's rate (62, 10, 10 %), or every
row of a subset of at most 25 (``subset_floor``). A sample's index is its place in that
order. A file without those columns, or a cell that is not what its column holds, is one
``DatasetError`` naming the file, the row and the column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.errors import DatasetError

_HINT = "give the BFCL v4 single-turn parquet (docs/llm-round.md) with --dataset-path"

#: The reference's categories and their subsets (``CATEGORY_MAP``, single-turn).
CATEGORY_MAP: dict[str, tuple[str, ...]] = {
    "non_live": ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                 "parallel_multiple"),
    "live": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "hallucination": ("irrelevance", "live_irrelevance"),
}
#: ``category_sample_pct`` and ``subset_floor`` of the round's configuration.
SAMPLE_PCT = {"non_live": 62.0, "live": 10.0, "hallucination": 10.0}
SUBSET_FLOOR = 25
COLUMNS = ("messages", "tools", "ground_truth", "subset")


@dataclass(frozen=True)
class BfclSample:
    """One sample: the request's chat part, and what scoring needs."""

    #: ``messages``, ``tools`` and ``tool_choice``, as the request carries them
    request: dict[str, Any]
    ground_truth: str
    #: BFCL's function descriptions (None: the file has none for it)
    func_description: list[dict[str, Any]] | None
    subset: str
    sample_id: str

    @property
    def user_text(self) -> str:
        """The last user message's text (what the pre-flight sends, and a short name)."""
        for message in reversed(self.request["messages"]):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                return str(message["content"])
        return ""


def _json_cell(path: Path, index: int, column: str, value: Any, kind: type) -> Any:
    """A JSON-text (or already decoded) cell, checked to be a ``kind``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: row {index}: column '{column}' is not JSON "
                               f"({exc.msg})", hint=_HINT) from None
    elif hasattr(value, "tolist"):  # a numpy array of objects, as parquet may give lists
        value = value.tolist()
    if not isinstance(value, kind):
        raise DatasetError(f"{path}: row {index}: column '{column}' holds "
                           f"{type(value).__name__}, not a JSON {kind.__name__}", hint=_HINT)
    return value


def _sample(path: Path, index: int, row: dict[str, Any]) -> BfclSample:
    messages = _json_cell(path, index, "messages", row["messages"], list)
    if not messages or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                               for m in messages):
        raise DatasetError(f"{path}: row {index}: column 'messages' is not a list of chat "
                           "messages (objects with a 'role')", hint=_HINT)
    tools = _json_cell(path, index, "tools", row["tools"], list)
    truth = row["ground_truth"]
    if not isinstance(truth, str):
        raise DatasetError(f"{path}: row {index}: column 'ground_truth' is "
                           f"{type(truth).__name__}, not JSON text", hint=_HINT)
    described = row.get("func_description")
    functions = (_json_cell(path, index, "func_description", described, list)
                 if isinstance(described, str) else None)
    request: dict[str, Any] = {"messages": messages, "tools": tools}
    choice = row.get("tool_choice")
    if isinstance(choice, str | dict):
        request["tool_choice"] = choice
    return BfclSample(request, truth, functions, str(row["subset"]),
                      str(row.get("sample_id", "")))


def select(samples: list[BfclSample]) -> list[BfclSample]:
    """The round's samples of the full set, in the reference's order (module docstring)."""
    wanted = {s: c for c, subsets in CATEGORY_MAP.items() for s in subsets}
    by_subset: dict[str, list[BfclSample]] = {}
    for sample in samples:
        if sample.subset in wanted:
            by_subset.setdefault(sample.subset, []).append(sample)
    chosen: list[BfclSample] = []
    for subset in sorted(by_subset):  # pandas' groupby: sorted keys, rows in file order
        rows = by_subset[subset]
        total = len(rows)
        count = total if total <= SUBSET_FLOOR else \
            max(1, int(total * SAMPLE_PCT[wanted[subset]] / 100))
        chosen.extend(rows[:count])
    return chosen


def load(path: Path) -> list[BfclSample]:
    """The round's samples from the single-turn parquet at ``path``."""
    from suite.llm.round import data as round_data

    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist", hint=_HINT)
    if path.stat().st_size == 0:
        raise DatasetError(f"dataset file {path} is empty", hint=_HINT)
    rows = round_data.parquet_rows(path)
    if not rows:
        raise DatasetError(f"dataset file {path} has no rows", hint=_HINT)
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise DatasetError(f"{path}: no column '{missing[0]}' (it has "
                           f"{', '.join(map(str, list(rows[0])[:8]))}): not BFCL v4's "
                           "single-turn parquet", hint=_HINT)
    chosen = select([_sample(path, i, row) for i, row in enumerate(rows)])
    if not chosen:
        raise DatasetError(f"{path}: no row of the round's subsets "
                           f"({', '.join(s for v in CATEGORY_MAP.values() for s in v)})",
                           hint=_HINT)
    return chosen
