"""The torch backend's task-card path: a ``torch.export`` program called by tensor name.

A task card (``ModelCard.is_task_card``) names every input and output of the official
model (``[[inputs]]``, ``[[outputs]]``). On torch it runs from a program saved by
``torch.export.save`` (``data.model_path``, a ``.pt2`` file; a stand-in's is written by
``suite.tasks.standin_torch``), not from the card's ``model.py``: the program carries its
own graph and weights, so any exported model with the official names drops in.

The call follows the program's own signature, recorded at export (``example_inputs``):
one dict of the card's inputs (dict in), keyword arguments named as the inputs, or
positional arguments in the card's ``[[inputs]]`` order. Its result is a dict by output
name (dict out), a tuple in ``[[outputs]]`` order, or one tensor for a one-output card;
``TaskProgram.call`` returns a dict by official name either way, as onnxruntime's named
call does. Options that reshape the computation (``dtype`` other than fp32, ``compile``,
``cuda_graphs``) are refused for a program: it runs as exported.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from suite.backends.base import BackendInfo
from suite.backends.torch_support import precision_flags
from suite.errors import BackendError, ModelError

if TYPE_CHECKING:
    from suite.backends.torch_options import TorchOptions
    from suite.models import ModelCard

_HINT = ("export the model with torch.export and torch.export.save (.pt2): forward takes a "
         "dict of the card's [[inputs]] by name and returns a dict of its [[outputs]] "
         "(docs/benchmarks.md, 'torch backend')")


@dataclass
class TaskProgram:
    """A loaded program, its calling convention, and what ``load`` reports."""

    torch: Any
    module: Any
    style: str  # "dict", "kwargs" or "positional"
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    device: Any
    info: BackendInfo

    @classmethod
    def load(cls, torch: Any, card: ModelCard, opts: TorchOptions) -> TaskProgram:
        """The card's program (``card.onnx_path``: the model file the config names)."""
        refused = [name for name, on in (("dtype != 'fp32'", opts.dtype != "fp32"),
                                         ("compile", opts.compile),
                                         ("cuda_graphs", opts.cuda_graphs)) if on]
        if refused:
            raise BackendError(f"backend torch: {', '.join(refused)} is not available for a "
                               f"task card ('{card.name}' runs its exported program as is)",
                               hint="drop these [backend.torch] options for this benchmark")
        path = card.onnx_path
        if path.suffix != ".pt2":
            raise ModelError(f"{path}: the torch backend runs task card '{card.name}' from a "
                             "torch.export program (.pt2), not this file", hint=_HINT)
        try:
            program = torch.export.load(str(path))
        except Exception as exc:  # torch raises its own untyped errors on a bad archive
            first = (str(exc).splitlines() or [""])[0]
            raise ModelError(f"torch could not load the program {path}: "
                             f"{type(exc).__name__}: {first}", hint=_HINT) from None
        inputs = tuple(spec.name for spec in card.inputs)
        style = _style(program, inputs, path)
        device = torch.device(opts.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise BackendError(f"torch {torch.__version__} cannot use CUDA here",
                               hint="install the CUDA build of torch, or use device 'cpu'")
        module = program.module().to(device)
        # Task inputs are read-only views of the staged dataset; the program never writes
        # to its inputs, and torch's warning per call would flood the child's log.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        info = BackendInfo(
            name="torch", version=torch.__version__, device=str(device), thread_safe=True,
            precision="fp32", weight_transformations="none: the exported program runs as "
            "saved (its sha256 is recorded)",
            details={"program": path.name, "call": style, "dtype": "fp32",
                     "num_threads": str(torch.get_num_threads()),
                     "tf32": precision_flags(torch)})
        return cls(torch, module, style, inputs, tuple(s.name for s in card.outputs),
                   device, info)

    def call(self, named: Mapping[str, Any]) -> dict[str, Any]:
        """The program once: numpy arrays by input name in, numpy arrays by output name out."""
        torch = self.torch
        with torch.inference_mode():
            tensors = {name: torch.from_numpy(named[name]).to(self.device)
                       for name in self.inputs}
            if self.style == "dict":
                result = self.module(tensors)
            elif self.style == "kwargs":
                result = self.module(**tensors)
            else:
                result = self.module(*(tensors[name] for name in self.inputs))
            if isinstance(result, Mapping):
                pairs = list(result.items())
            elif isinstance(result, (tuple, list)):
                if len(result) != len(self.outputs):
                    raise BackendError(f"the torch program returned {len(result)} outputs; "
                                       f"the card names {len(self.outputs)} ({self.outputs})")
                pairs = list(zip(self.outputs, result, strict=True))
            else:
                pairs = [(self.outputs[0], result)]
            return {name: value.detach().cpu().numpy() for name, value in pairs}


def _style(program: Any, inputs: tuple[str, ...], path: Any) -> str:
    """How the program takes the card's inputs, from the example it was exported with."""
    example = getattr(program, "example_inputs", None)
    args, kwargs = example if example is not None else ((), {})
    if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
        style, names = "dict", set(args[0])
    elif kwargs and not args:
        style, names = "kwargs", set(kwargs)
    else:
        style, names = "positional", set(inputs) if len(args) == len(inputs) else set()
    if names != set(inputs):
        raise ModelError(f"{path}: the program takes {sorted(names) or 'other arguments'}; "
                         f"the card's inputs are {list(inputs)}", hint=_HINT)
    return style
