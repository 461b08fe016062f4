"""The simulated accelerator and the Server scheduler it exists to exercise, in process.

Unit tests of the backend (profiles, outputs, raw input, staging buffers, shape
warming, the device timeline), of the batch-cost fit and cap, and of the batch record.
The runs through the real CLI and LoadGen are in tests/integration/test_simulated.py.
No assertion depends on this machine's speed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.backends import simulated
from suite.backends.base import RawInput
from suite.backends.simulated import SimulatedBackend, SimulatedOptions, bucket, load_profile
from suite.backends.simulated_devices import _Device
from suite.errors import BackendError
from suite.harness.sut.batch_stats import BatchStats, merge
from suite.harness.sut.server_policy import BatchCost
from suite.models import load_card
from suite.paths import find_paths
from tests.conftest import REPO

PROFILES = REPO / "reference_models" / "simulated" / "profiles.toml"


@pytest.fixture(scope="module")
def digits_card() -> Any:
    return load_card(find_paths(), "digits")


def loaded(card: Any, max_batch: int = 32, **options: Any) -> SimulatedBackend:
    backend = SimulatedBackend(SimulatedOptions(**{"jitter": 0.0, **options}))
    backend.load(card, max_batch)
    return backend


def test_every_shipped_profile_loads_and_states_its_peak() -> None:
    import tomllib

    names = tomllib.loads(PROFILES.read_text(encoding="utf-8"))["profiles"]
    assert {"resnet50-h100-fp16", "resnet50-4gpu-fp16", "slow-cpu"} <= set(names)
    for name in names:
        profile = load_profile(PROFILES, name)
        assert profile.peak_samples_per_s == pytest.approx(
            profile.devices * 1e3 / profile.per_sample_ms)


def test_an_unknown_or_broken_profile_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="no profile 'nope'") as info:
        load_profile(PROFILES, "nope")
    assert "resnet50-h100-fp16" in (info.value.hint or "")
    broken = tmp_path / "profiles.toml"
    broken.write_text("[profiles.x]\nfixed_ms = 1\n", encoding="utf-8")
    with pytest.raises(BackendError, match=r"\[profiles.x\]: missing or invalid"):
        load_profile(broken, "x")
    broken.write_text("[profiles.x]\nfixed_ms = 1\nper_sample_ms = 1\nstreams = 0\n"
                      "devices = 1\n", encoding="utf-8")
    with pytest.raises(BackendError, match="streams and devices must be >= 1"):
        load_profile(broken, "x")


def test_outputs_have_the_cards_shape_and_are_a_function_of_each_sample(
        digits_card: Any) -> None:
    backend = loaded(digits_card, profile="slow-cpu")
    rng = np.random.default_rng(1)
    batch = rng.random((7, 1, 8, 8), dtype=np.float32)
    out = backend.predict(batch)
    assert out.shape == (7, 10) and out.dtype == np.float32
    assert len(set(out.argmax(axis=1).tolist())) > 1  # not a constant answer
    np.testing.assert_array_equal(backend.predict(batch[2:5]), out[2:5])
    np.testing.assert_array_equal(loaded(digits_card, profile="slow-cpu").predict(batch), out)


def test_a_class_index_card_gets_class_indices() -> None:
    card = load_card(find_paths(), "resnet50")
    backend = loaded(card, 8, profile="slow-cpu")
    assert backend.accept_raw_input(RawInput((224, 224, 3), "uint8", (1.0, 2.0, 3.0), "NCHW"))
    batch = np.random.default_rng(0).integers(0, 255, (3, 224, 224, 3), dtype=np.uint8)
    out = backend.predict(batch)
    assert out.shape == (3,) and out.dtype == np.int64


def test_a_batch_in_its_own_buffer_is_not_copied_again(digits_card: Any) -> None:
    backend = loaded(digits_card, 16, profile="slow-cpu")
    buffer = backend.input_buffer(16, (1, 8, 8), "float32")
    assert buffer is not None and buffer.shape == (16, 1, 8, 8)
    buffer[:] = np.random.default_rng(2).random(buffer.shape, dtype=np.float32)
    staged = getattr(backend._local, "buffer", None)
    backend.predict(buffer[:4])
    assert getattr(backend._local, "buffer", None) is staged  # no staging buffer made
    backend.predict(np.array(buffer[:4]))  # pageable: staged first
    assert backend._local.buffer is not None


@pytest.mark.parametrize(("shapes", "cold"), [("all", 0), ("buckets", 0), ("none", 3)])
def test_shapes_policy_decides_which_calls_pay_the_first_shape_cost(
        digits_card: Any, shapes: str, cold: int) -> None:
    backend = SimulatedBackend(SimulatedOptions(profile="digits-h100", shapes=shapes))
    info = backend.load(digits_card, 16)
    assert info.details["shapes"].startswith(shapes)
    for n in (3, 5, 3, 16, 5):
        backend.predict(np.zeros((n, 1, 8, 8), dtype=np.float32))
    assert backend.devices.calls()[1] == cold


def test_the_device_timeline_overlaps_fixed_parts_and_serialises_compute() -> None:
    ms = 1e-3
    device = _Device([0.0, 0.0])  # two streams
    # Idle: the transfer hides in the fixed part, then the compute.
    assert device.reserve(0.0, 0.5 * ms, 2 * ms, 3 * ms) == pytest.approx(5 * ms)
    # A second call at once overlaps its fixed part but queues for the compute, and
    # its transfer waits for the copy engine (0.5 + 0.5 ms, still inside its fixed).
    assert device.reserve(0.0, 0.5 * ms, 2 * ms, 1 * ms) == pytest.approx(6 * ms)
    assert device.copy_free == pytest.approx(1 * ms)
    assert device.running(4 * ms) == 2 and device.running(5.5 * ms) == 1
    # Both streams busy: a third call starts when the first stream frees (5 ms).
    assert device.reserve(1 * ms, 0.0, 2 * ms, 1 * ms) == pytest.approx(8 * ms)


def test_a_call_ready_early_takes_a_gap_in_the_compute_without_delaying_others() -> None:
    ms = 1e-3
    device = _Device([0.0, 0.0])
    assert device.reserve(0.0, 0.0, 10 * ms, 1 * ms) == pytest.approx(11 * ms)  # cold
    assert device.reserve(0.0, 0.0, 2 * ms, 3 * ms) == pytest.approx(5 * ms)  # fits before
    assert device.compute == [(pytest.approx(2 * ms), pytest.approx(5 * ms)),
                              (pytest.approx(10 * ms), pytest.approx(11 * ms))]


def test_the_host_thread_sleeps_once_holding_nothing_so_a_late_wake_up_is_not_device_time(
        digits_card: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host thread that wakes late (the GIL, a busy machine) must not hold the
    simulated device: one sleep per call, with the backend's lock free, for the call's
    time on the device as the profile gives it."""
    backend = loaded(digits_card, 16, profile="resnet50-4gpu-fp16")  # 2 ms + 0.33 ms/sample
    sleeps: list[tuple[float, bool]] = []
    monkeypatch.setattr(simulated, "_sleep", lambda s: sleeps.append(
        (s, backend._lock.locked() or backend.devices._lock.locked())))
    before = time.perf_counter()
    backend.predict(np.zeros((3, 1, 8, 8), dtype=np.float32))
    after = time.perf_counter()
    [(seconds, locked)] = sleeps
    assert not locked
    [(start, end)] = backend.devices._devices[0].compute  # 3 x 0.33 ms after the 2 ms fixed part
    assert end - start == pytest.approx(0.99e-3)
    assert before <= start - 2e-3 <= after
    assert before <= end - seconds <= after  # it sleeps until the call's end, no longer
    assert backend.devices._devices[0].running(end - 1e-6) == 1


def test_calls_spread_over_the_devices_with_the_fewest_running(digits_card: Any,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    backend = loaded(digits_card, 16, profile="resnet50-4gpu-fp16")  # 4 devices x 2 streams
    monkeypatch.setattr(simulated, "_sleep", lambda s: None)  # return before the end
    # A frozen clock: on a busy machine the first call could end (4.6 ms of simulated
    # device time) before the eighth is placed, and the spread would depend on the load.
    now = time.perf_counter()
    monkeypatch.setattr(simulated.time, "perf_counter", lambda: now)
    for _ in range(8):
        backend.predict(np.zeros((1, 1, 8, 8), dtype=np.float32))
    assert [device.running(now) for device in backend.devices._devices] == [2, 2, 2, 2]


def test_buckets_are_powers_of_two_capped_at_the_max() -> None:
    assert [bucket(n, 48) for n in (1, 2, 3, 5, 17, 33, 48)] == [1, 2, 4, 8, 32, 48, 48]


def test_the_record_says_simulated_not_a_precision(digits_card: Any) -> None:
    info = SimulatedBackend(SimulatedOptions()).load(digits_card, 8)
    assert info.precision == "simulated" and "no model weights" in info.weight_transformations
    assert info.details["peak_samples_per_s"] == "12500" and info.details["streams"] == "4"


def test_batch_cost_fits_the_fixed_and_per_sample_parts() -> None:
    cost = BatchCost.fit(1, 4.58e-3, 256, 25.0e-3)
    assert cost.per_sample_s == pytest.approx(0.08e-3, rel=1e-3)
    assert cost.fixed_s == pytest.approx(4.5e-3, rel=1e-3)


def test_the_cap_keeps_batches_inside_the_bound_but_never_starves_the_rate() -> None:
    cost = BatchCost(4.5e-3, 0.08e-3)
    # A batch may take half of 15 ms: (7.5 - 4.5) / 0.08 = 37 samples.
    assert cost.batch_cap(15e-3, 256, workers=2) == 37
    # At 6,000 QPS each of two workers must carry 1.25 x 3 = 3.75 samples/ms: 24 do.
    assert cost.batch_cap(15e-3, 256, workers=2, rate=6000) == 37
    # At 12,000 QPS, 7.5/ms each: n / (4.5 + 0.08 n) >= 7.5 needs n >= 84.4, so 85.
    assert cost.batch_cap(15e-3, 256, workers=2, rate=12000) == 85
    # A rate no batch size carries: as large as allowed.
    assert cost.batch_cap(15e-3, 256, workers=2, rate=40000) == 256
    # A fixed cost over the bound: batches of one, unless the rate needs more.
    assert BatchCost(20e-3, 1e-4).batch_cap(15e-3, 64) == 1
    assert BatchCost(0.0, 0.0).batch_cap(15e-3, 64) == 64


def test_batch_stats_merge_bins_sizes_and_sums_phases() -> None:
    a, b = BatchStats(64), BatchStats(64)
    for n in (1, 2, 3, 4, 5, 64):
        a.add(n, 0.001, 0.002, 0.0005)
    b.add(33, 0.01, 0.02, 0.005)
    record = merge([a, b])
    assert record["batches"] == 7 and record["samples"] == 112
    assert record["size_histogram"] == {"1": 1, "2": 1, "3-4": 2, "5-8": 1, "33-64": 2}
    assert record["gather_s"] == pytest.approx(0.016)
    assert merge([]) == {}

