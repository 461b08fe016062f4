"""A child the parent had to end (a stop on a machine too busy for it to exit within
``runner.STOP_KILL_S``) still leaves a ``status.json``: the parent writes what it knows.
Found at load 20 on 2 cores: the openai Ctrl-C test ended INTERRUPTED with no status.json."""

from __future__ import annotations

import json
from pathlib import Path

from suite.harness import runner


def test_a_killed_childs_status_is_written_by_the_parent(tmp_path: Path) -> None:
    killed = "the child had not exited 1 s after the stop request and was ended"
    runner._parent_status(tmp_path, "Ctrl-C", -9, killed)
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "interrupted" and status["exit_code"] == 130
    assert status["reason"] == "Ctrl-C" and status["note"] == killed
    assert status["child_returncode"] == -9 and "parent" in status["written_by"]
    assert not (tmp_path / "status.json.tmp").exists()


def test_a_child_ended_for_silence_is_failed_not_interrupted(tmp_path: Path) -> None:
    runner._parent_status(tmp_path, "", -9, "no heartbeat for 120 s")
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "failed" and status["exit_code"] == 1
    assert status["reason"] == "no heartbeat for 120 s"
