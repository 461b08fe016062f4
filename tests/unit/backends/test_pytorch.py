"""The torch backend's shape policy, precision record and raw-input seam.

On a CPU: the shape plan (which sizes are warmed, which bucket a batch is padded to),
what ``BackendInfo`` records, that padding changes no answer, the refusal of raw
input, and the device normalisation compared with ``preprocess.normalize`` on CPU
tensors. On a GPU (``gpu`` marker, skipped with the reason printed elsewhere): raw
input gives the normalised answers, page-locked buffers are used as they are,
compiled calls from several threads compile nothing new, and every size is warmed.

The models are the digits card's real module and weights; a recording wrapper around
that module (a spy, not a fake) shows which batch sizes reached it.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from suite.backends.base import RawInput, nvidia_gpu_problem
from suite.backends.pytorch import TorchBackend, TorchOptions
from suite.backends.torch_support import (
    ShapePlan,
    normalize_on_device,
    plan_shapes,
    precision_record,
)
from suite.datasets.digits import validation_split
from suite.datasets.preprocess import NormalizeParams, normalize
from suite.models import load_card
from suite.paths import find_paths

torch = pytest.importorskip("torch", reason="the torch backend needs torch installed")

MAX = 16


@pytest.fixture(scope="module")
def card() -> Any:
    return load_card(find_paths(), "digits")


@pytest.fixture(scope="module")
def images(card: Any) -> np.ndarray:
    return np.ascontiguousarray(validation_split(card)[0][:64], dtype=np.float32)


class RecordingTorch(TorchBackend):
    """The real backend; its module records the batch size of every forward."""

    def build_model(self, card: Any) -> Any:
        model = super().build_model(card)
        seen: list[int] = []
        self.seen = seen

        class Recorder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, x: Any) -> Any:
                seen.append(int(x.shape[0]))
                return self.inner(x)

        return Recorder().eval()


def loaded(card: Any, **options: Any) -> RecordingTorch:
    backend = RecordingTorch(TorchOptions(**options))
    backend.info = backend.load(card, MAX)  # type: ignore[attr-defined]
    return backend


# -- the plan, pure ---------------------------------------------------------------------


def test_auto_warms_every_size_on_cuda_and_buckets_with_cuda_graphs() -> None:
    assert plan_shapes("auto", cuda=True, max_batch=256).warm == tuple(range(1, 257))
    graphs = plan_shapes("auto", cuda=True, max_batch=256, cuda_graphs=True)
    assert graphs.policy == "buckets"
    assert graphs.warm == graphs.buckets == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert plan_shapes("auto", cuda=False, max_batch=256).warm == (1, 2, 3, 256)


def test_buckets_end_at_the_maximum_and_pad_to_the_next() -> None:
    plan = plan_shapes("buckets", cuda=True, max_batch=12)
    assert plan.buckets == (1, 2, 4, 8, 12)
    assert [plan.bucket(n) for n in (1, 3, 5, 8, 9, 12)] == [1, 4, 8, 8, 12, 12]
    custom = plan_shapes("buckets", cuda=True, max_batch=40, graph_sizes=(32, 8))
    assert custom.buckets == (8, 32, 40)  # a batch of 33 must not run at an unwarmed size
    assert ShapePlan("all", (1, 2, 3)).bucket(3) == 3  # "all" never pads


def test_the_plan_describes_itself_as_details_record_it() -> None:
    assert plan_shapes("all", cuda=True, max_batch=256).describe() == "all 1..256"
    assert (plan_shapes("buckets", cuda=True, max_batch=8).describe()
            == "buckets 1,2,4,8 (padded)")
    assert plan_shapes("auto", cuda=False, max_batch=16).describe() == "small 1,2,3,16"


def test_precision_record_says_tf32_and_casts() -> None:
    assert precision_record("fp32", False) == ("fp32", "none")
    assert precision_record("fp32", True) == ("fp32 (tf32 matmul/conv)", "none")
    assert precision_record("fp16", False) == ("fp16", "cast to fp16")
    assert precision_record("bf16", False) == ("bf16", "cast to bf16")


def test_options_refuse_tf32_off_cuda_fp32_and_all_shapes_with_graphs() -> None:
    from pydantic import ValidationError

    assert TorchOptions(device="cuda", tf32=True).tf32
    for bad in ({"tf32": True}, {"device": "cuda", "dtype": "fp16", "tf32": True},
                {"device": "cuda", "cuda_graphs": True, "shapes": "all"}):
        with pytest.raises(ValidationError):
            TorchOptions(**bad)


# -- the device normalisation, on CPU tensors -------------------------------------------


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_device_normalisation_equals_preprocess_normalize(layout: str,
                                                          channels_last: bool) -> None:
    crops = np.random.default_rng(0).integers(0, 256, (5, 7, 9, 3), dtype=np.uint8)
    params = NormalizeParams(layout=layout)  # type: ignore[arg-type]
    want = normalize(crops, params)
    means = torch.tensor(params.means, dtype=torch.float32)
    got = normalize_on_device(torch, torch.from_numpy(crops), means, layout, torch.float32,
                              channels_last)
    assert got.dtype == torch.float32 and tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    half = normalize_on_device(torch, torch.from_numpy(crops), means, layout, torch.float16,
                               channels_last)
    # The same as normalising on the host and then casting, as the float path does.
    np.testing.assert_array_equal(half.numpy(), torch.from_numpy(want).half().numpy())


# -- loaded on the CPU -------------------------------------------------------------------


@pytest.mark.parametrize(("shapes", "warmed", "recorded"), [
    ("auto", [1, 2, 3, 16], "small 1,2,3,16"),
    ("all", list(range(1, MAX + 1)), "all 1..16"),
    ("buckets", [1, 2, 4, 8, 16], "buckets 1,2,4,8,16 (padded)"),
])
def test_load_warms_the_policy_sizes_and_records_them(card: Any, shapes: str,
                                                      warmed: list[int], recorded: str) -> None:
    backend = loaded(card, shapes=shapes)
    assert backend.seen == warmed
    assert backend.info.details["shapes"] == recorded  # type: ignore[attr-defined]


def test_buckets_pad_the_batch_and_return_its_rows_unchanged(card: Any,
                                                            images: np.ndarray) -> None:
    padded, plain = loaded(card, shapes="buckets"), loaded(card, shapes="all")
    padded.seen.clear()
    got = padded.predict(images[:5])
    assert padded.seen == [8]  # ran at the bucket
    assert got.shape == (5, 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, plain.predict(images[:5]), atol=1e-5)
    np.testing.assert_allclose(padded.predict(images[:16]), plain.predict(images[:16]),
                               atol=1e-5)


def test_precision_and_flags_are_recorded(card: Any) -> None:
    fp32 = loaded(card).info  # type: ignore[attr-defined]
    assert (fp32.precision, fp32.weight_transformations) == ("fp32", "none")
    assert fp32.details["tf32"].startswith("cudnn.allow_tf32=")
    assert "float32_matmul_precision=" in fp32.details["tf32"]
    assert fp32.details["cudnn_benchmark"] in ("True", "False")
    bf16 = loaded(card, dtype="bf16").info  # type: ignore[attr-defined]
    assert (bf16.precision, bf16.weight_transformations) == ("bf16", "cast to bf16")


class ArgMaxTorch(TorchBackend):
    """The digits module with an argmax head, as a card whose output is a class index."""

    def build_model(self, card: Any) -> Any:
        inner = super().build_model(card)

        class Head(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: Any) -> Any:
                return torch.argmax(self.inner(x), dim=1)

        return Head().eval()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_integer_outputs_keep_their_type_and_floats_become_float32(
        card: Any, images: np.ndarray, dtype: str) -> None:
    logits = loaded(card, dtype=dtype).predict(images[:9])
    head = ArgMaxTorch(TorchOptions(dtype=dtype))
    head.load(card, MAX)
    classes = head.predict(images[:9])
    assert logits.dtype == np.float32  # bf16 has no numpy type: widened
    assert classes.dtype == np.int64 and classes.shape == (9,)
    np.testing.assert_array_equal(classes, logits.argmax(axis=1))


class FakeCuda:
    """Stands in for ``torch.cuda`` in the unit test of the slot hand-out alone."""

    class Stream:
        def __init__(self, device: Any) -> None:
            self.device = device


def test_slots_are_handed_out_warmed_first_then_made_new() -> None:
    from types import SimpleNamespace

    from suite.backends.torch_support import StreamSlots

    slots = StreamSlots(SimpleNamespace(cuda=FakeCuda), "cuda:0", 2, copy_stream=False)
    first, second, third = slots.take(), slots.take(), slots.take()
    assert [first, second] == slots.warmed  # in order, each once
    assert third not in slots.warmed and third.copy is None and third.pinned is None


def test_raw_input_and_pinned_buffers_are_refused_on_cpu(card: Any) -> None:
    backend = loaded(card)
    assert backend.accept_raw_input(RawInput((8, 8, 1), "uint8", (8.0,), "NCHW")) is False
    assert backend.input_buffer(MAX, (1, 8, 8), "float32") is None


# -- on a GPU ------------------------------------------------------------------------------


def needs_cuda() -> None:
    problem = nvidia_gpu_problem()
    if problem is not None:
        pytest.skip(f"torch CUDA tests: {problem}")
    if not torch.cuda.is_available():
        pytest.skip(f"torch CUDA tests: torch {torch.__version__} has no usable CUDA")


def every_size_from_4_threads(backend: RecordingTorch, images: np.ndarray) -> list[Any]:
    """Every batch size from 4 threads at once (each starting elsewhere); the stream slot
    each thread computed on."""
    used: list[Any] = []
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for size in range(1, MAX + 1):
                n = (size + offset) % MAX + 1
                assert backend.predict(images[:n]).shape == (n, 10)
            used.append(backend._thread_state())
        except BaseException as exc:  # collected: an assert in a thread is lost otherwise
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return used


@pytest.mark.gpu
def test_gpu_raw_input_gives_the_normalised_answers(card: Any) -> None:
    needs_cuda()
    backend = loaded(card, device="cuda")
    raw = RawInput((8, 8, 1), "uint8", (8.0,), "NCHW")
    pixels = np.random.default_rng(1).integers(0, 17, (MAX, 8, 8, 1), dtype=np.uint8)
    normalised = np.ascontiguousarray(
        (pixels.astype(np.float32) - 8.0).transpose(0, 3, 1, 2))
    want = backend.predict(normalised)
    assert backend.accept_raw_input(raw) is True
    np.testing.assert_allclose(backend.predict(pixels), want, atol=1e-5)
    buffer = backend.input_buffer(MAX, raw.shape, raw.dtype)
    assert buffer is not None and buffer.shape == (MAX, 8, 8, 1)
    assert torch.from_numpy(buffer).is_pinned()
    buffer[:7] = pixels[:7]
    np.testing.assert_allclose(backend.predict(buffer[:7]), want[:7], atol=1e-5)


@pytest.mark.gpu
def test_gpu_every_size_is_warmed_and_compiled_threads_compile_nothing_new(
        card: Any, images: np.ndarray) -> None:
    needs_cuda()
    from torch._dynamo.utils import counters

    backend = loaded(card, device="cuda", compile=True)
    assert backend.info.details["shapes"] == f"all 1..{MAX}"  # type: ignore[attr-defined]
    graphs = counters["stats"]["unique_graphs"]
    every_size_from_4_threads(backend, images)
    assert counters["stats"]["unique_graphs"] == graphs, "a shape compiled under load"


@pytest.mark.gpu
def test_gpu_worker_threads_compute_on_the_streams_warmed_at_load(
        card: Any, images: np.ndarray) -> None:
    # On an H100 (2026-11-26) 4 threads on warmed streams still made 8 new cudaMalloc
    # segments (45 -> 53) under concurrency, so this asserts the hand-out, not the
    # allocator: every worker thread computes on a stream that load warmed.
    needs_cuda()
    backend = loaded(card, device="cuda", streams=4)
    details = backend.info.details  # type: ignore[attr-defined]
    assert details["streams"] == "4 warmed at load, one per worker thread"
    slots = backend._slots
    assert slots is not None and len(slots.warmed) == 4
    used = every_size_from_4_threads(backend, images)
    assert sorted(map(id, used)) == sorted(map(id, slots.warmed))


@pytest.mark.gpu
def test_gpu_tf32_is_set_from_the_option_and_recorded(card: Any) -> None:
    needs_cuda()
    off = loaded(card, device="cuda").info  # type: ignore[attr-defined]
    assert off.precision == "fp32" and "cudnn.allow_tf32=False" in off.details["tf32"]
    on = loaded(card, device="cuda", tf32=True).info  # type: ignore[attr-defined]
    assert on.precision == "fp32 (tf32 matmul/conv)"
    assert "cudnn.allow_tf32=True" in on.details["tf32"]
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
