"""Which backends warm each worker thread themselves (``BackendBase.warm_per_thread``)."""

from __future__ import annotations

import pytest

from suite.backends.base import BackendBase


def test_the_default_warms_every_thread_and_cpu_onnxruntime_warms_once() -> None:
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")
    from suite.backends.null import NullBackend
    from suite.backends.onnxruntime import OnnxRuntimeBackend, OnnxRuntimeOptions

    assert NullBackend().warm_per_thread  # the safe default: per-thread state exists
    assert isinstance(NullBackend(), BackendBase)
    assert not OnnxRuntimeBackend().warm_per_thread  # CPU: the session's costs, once
    gpu = OnnxRuntimeBackend(OnnxRuntimeOptions(
        providers=("CUDAExecutionProvider", "CPUExecutionProvider")))
    assert gpu.warm_per_thread  # a device provider keeps per-thread warm-ups
