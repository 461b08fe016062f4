"""Compliance TEST06 for LLM benchmarks: first token, EOS and token count, from the log.

Ported from ``mlcommons/inference`` ``compliance/TEST06`` (``audit.config`` and
``run_verification.py``). The run is a short performance-mode test whose audit.config makes
LoadGen log about 100 samples' outputs; the verification reads that accuracy log:

1. first token check (skipped in Offline, where no first token is reported): each logged
   ``token_data`` must be the prefix of the sample's output;
2. EOS check: an output may end with at most one EOS token (no "EOS padding");
3. sample length check: the reported ``token_count`` (``n_tokens``) equals the output length.

``verify_accuracy.txt`` holds the official lines ("First token check pass: True", "EOS check
pass: True", "Sample length check pass: True", then "TEST06 verification complete" or
"TEST06 verification failed"), which ``suite check`` accepts as TEST06's pass lines. The
file says what the suite concluded and nothing kinder: a check passes only on evidence,
so no logged sample fails every check, an empty first token is no first token, and an
entry whose output cannot be decoded fails the checks it cannot answer. Evidence lines
(why a check failed) come before the last line, which is always the verdict.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suite.accuracy import read_accuracy_entries

NAME = "TEST06"
VERIFY_FILE = "verify_accuracy.txt"
#: compliance/TEST06/audit.config, as "*.*" lines (LoadGen applies it with model "*").
AUDIT = {"mode": 2, "accuracy_log_rng_seed": 720381539243781796,
         "accuracy_log_sampling_target": 100, "min_query_count": 100, "min_duration": 0,
         "sample_concatenate_permutation": 0}


def audit_text() -> str:
    lines = [f"# {NAME} audit.config, written by infersuite for this run only"]
    lines += [f"*.*.{key} = {value}" for key, value in AUDIT.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Test06Verdict:
    first_token: bool | None  # None: skipped (Offline)
    eos: bool
    length: bool
    samples: int
    evidence: list[str]

    @property
    def passed(self) -> bool:
        return self.first_token is not False and self.eos and self.length and self.samples > 0

    def lines(self) -> list[str]:
        first = "Skipped" if self.first_token is None else str(self.first_token)
        return [f"First token check pass: {first}", f"EOS check pass: {self.eos}",
                f"Sample length check pass: {self.length}",
                f"TEST06 verification {'complete' if self.passed else 'failed'}"]


def _tokens(hex_data: object) -> list[int] | None:
    """The int32 token ids of a logged hex field; None when it is not one."""
    if not isinstance(hex_data, str):
        return None
    try:
        tokens: list[int] = np.frombuffer(bytes.fromhex(hex_data), dtype="<i4").tolist()
    except ValueError:  # not hex, or not a whole number of int32 ids
        return None
    return tokens


def verify_entries(entries: list[dict[str, Any]], offline: bool, eos_id: int) -> Test06Verdict:
    """The three checks over the accuracy log's entries (int32 token ids). With no entry
    nothing was checked, so no check passes: the file then says False on each line, which
    is what ``suite check`` reads."""
    if not entries:
        return Test06Verdict(None if offline else False, False, False, 0,
                             ["no sample was logged: nothing was checked"])
    first_ok: bool | None = None if offline else True
    eos_ok = length_ok = True
    evidence: list[str] = []
    for entry in entries:
        where = f"qsl_idx {entry.get('qsl_idx')}"
        data = _tokens(entry.get("data"))
        if data is None:  # nothing to check against: no check of this sample passes
            if not offline:
                first_ok = False
            eos_ok = length_ok = False
            evidence.append(f"{where}: the logged output is not int32 token ids")
            continue
        if not offline:
            first = _tokens(entry.get("token_data"))
            if "token_data" not in entry:
                first_ok = False
                evidence.append(f"{where}: no first token logged")
            elif not first:  # undecodable or empty: the SUT reported no first token
                first_ok = False
                evidence.append(f"{where}: the logged first token is empty or not token ids")
            elif data[:len(first)] != first:
                first_ok = False
                evidence.append(f"{where}: first token {first} is not the output's "
                                f"first token {data[:1]}")
        trailing = len(data) - len(np.trim_zeros(np.asarray(data) - eos_id, "b"))
        if trailing >= 2:
            eos_ok = False
            evidence.append(f"{where}: the output ends with {trailing} EOS tokens")
        if int(entry.get("token_count", -1)) != len(data):
            length_ok = False
            evidence.append(f"{where}: token_count {entry.get('token_count')} != "
                            f"{len(data)} output tokens")
    return Test06Verdict(first_ok, eos_ok, length_ok, len(entries), evidence[:20])


def verify_run(accuracy_log: Path, out_dir: Path, offline: bool, eos_id: int) -> Test06Verdict:
    """Verify a TEST06 run's accuracy log; write ``TEST06/verify_accuracy.txt`` and a copy
    of the log into ``out_dir`` (a missing or empty log is a failure, never a pass)."""
    entries = read_accuracy_entries(accuracy_log)
    verdict = verify_entries(entries, offline, eos_id)
    target = out_dir / NAME
    target.mkdir(parents=True, exist_ok=True)
    *checks, conclusion = verdict.lines()
    lines = [*checks, *verdict.evidence, conclusion]  # the verdict stays the last line
    (target / VERIFY_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copyfile(accuracy_log, target / accuracy_log.name)
    return verdict
