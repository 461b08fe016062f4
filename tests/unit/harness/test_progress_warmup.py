"""The progress line says "warming up" until there is a rate (issue 29.6): a test with
nothing completed yet has none, and "0 samples/s" there misled; a first beat shows its
count (a finished accuracy pass said "warming up")."""

from __future__ import annotations

from suite.harness.progress import LiveEstimator, LiveStatus, describe


def test_first_beat_and_nothing_completed_say_warming_up() -> None:
    ticks = iter([0.0, 0.25, 0.5])
    offline = LiveEstimator("offline", clock=lambda: next(ticks))
    # one beat: a count, no rate (an accuracy pass often ends within it)
    assert describe(offline.observe(completed=512, issued=1)) == "512 samples"
    assert describe(offline.observe(completed=1024, issued=1)) == "2,048 samples/s"
    stuck = LiveStatus("server", completed=0, elapsed_s=3.0, rate=0.0, backlog=40,
                       target_qps=100.0)
    assert describe(stuck) == "warming up, 40 waiting"
    running = LiveStatus("server", completed=300, elapsed_s=3.0, rate=100.0, target_qps=100.0)
    assert describe(running) == "100 of 100 QPS"
