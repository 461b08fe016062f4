"""The torch backend's task-card path (``suite.backends.torch_task``): a ``torch.export``
program is called the way it was exported (one dict, keyword arguments, or positional in
the card's ``[[inputs]]`` order) and answers a dict by the card's output names, whatever
it returns (a dict, a tuple in ``[[outputs]]`` order); a program that takes other names,
a file that is no program, and options it cannot honour are each one clear error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from suite.backends.torch_options import TorchOptions  # noqa: E402
from suite.backends.torch_task import TaskProgram  # noqa: E402
from suite.errors import BackendError, ModelError  # noqa: E402


class _Dict(torch.nn.Module):
    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"diff": inputs["a"] - inputs["b"], "sum": inputs["a"] + inputs["b"]}


class _Args(torch.nn.Module):
    def forward(self, a: Any, b: Any) -> tuple[Any, Any]:
        return a + b, a - b


def _card(path: Path, inputs: tuple[str, ...] = ("a", "b")) -> Any:
    return SimpleNamespace(name="toy", onnx_path=path,
                           inputs=[SimpleNamespace(name=n) for n in inputs],
                           outputs=[SimpleNamespace(name=n) for n in ("sum", "diff")])


def _save(tmp_path: Path, style: str) -> Path:
    a, b = torch.ones(2, 3), torch.full((2, 3), 2.0)
    if style == "dict":
        program = torch.export.export(_Dict(), ({"a": a, "b": b},))
    elif style == "kwargs":
        program = torch.export.export(_Args(), (), {"a": a, "b": b})
    else:
        program = torch.export.export(_Args(), (a, b))
    path = tmp_path / f"{style}.pt2"
    torch.export.save(program, str(path))
    return path


@pytest.mark.parametrize("style", ["dict", "kwargs", "positional"])
def test_a_program_is_called_as_exported_and_answers_by_output_name(
        tmp_path: Path, style: str) -> None:
    program = TaskProgram.load(torch, _card(_save(tmp_path, style)), TorchOptions())
    assert program.style == style and program.info.details["call"] == style
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    out = program.call({"b": b, "a": a})
    assert sorted(out) == ["diff", "sum"]
    np.testing.assert_array_equal(out["sum"], a + b)
    np.testing.assert_array_equal(out["diff"], a - b)


def test_other_input_names_a_non_program_and_unhonoured_options_are_refused(
        tmp_path: Path) -> None:
    path = _save(tmp_path, "dict")
    with pytest.raises(ModelError, match=r"the program takes \['a', 'b'\]; the card's "
                                         r"inputs are \['input_ids', 'b'\]"):
        TaskProgram.load(torch, _card(path, ("input_ids", "b")), TorchOptions())
    onnx_file = tmp_path / "model.onnx"
    onnx_file.write_bytes(b"not a program")
    with pytest.raises(ModelError, match=r"torch.export program \(\.pt2\)"):
        TaskProgram.load(torch, _card(onnx_file), TorchOptions())
    broken = tmp_path / "broken.pt2"
    broken.write_bytes(b"not a zip")
    with pytest.raises(ModelError, match="torch could not load the program"):
        TaskProgram.load(torch, _card(broken), TorchOptions())
    with pytest.raises(BackendError, match=r"dtype != 'fp32', compile is not available"):
        TaskProgram.load(torch, _card(path), TorchOptions(dtype="fp16", compile=True))
