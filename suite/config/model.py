"""The typed configuration of a run: ``[loadgen]``, ``[sut]``, ``[data]`` and the
resolved ``RunConfig``. ``loader`` resolves them from their layers (and re-exports
them); this module only says what a valid value is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from suite.config.rules import RunRules
from suite.errors import ConfigError
from suite.scenarios import Mode, Scenario

#: The largest ``sut.max_batch_size``: 65,536 ResNet-50 inputs are 39 GB of float32,
#: more than any accelerator holds; a larger value is a typo (an extra digit or two),
#: and it would size the SUT's staging buffers before anything else could fail.
MAX_BATCH_SIZE = 65_536
#: Worker threads or processes (``sut.workers``, ``data.preprocess_workers``): far above
#: what any machine runs well (2,000 on two cores did not finish a 1 s test in 90 s); the
#: linter warns well below it.
MAX_WORKERS = 256
#: The highest query rate a config may ask for: one query per nanosecond, the
#: resolution of LoadGen's clock. A higher rate cannot be scheduled, and LoadGen would
#: size its query schedule from it before the run could fail.
MAX_QPS = 1e9


class _Section(BaseModel):
    # allow_inf_nan=False: TOML and --set accept inf and nan, and no setting means either
    # (target_qps = inf once reached LoadGen's query-count arithmetic as a traceback).
    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False,
                              defer_build=True)


class LoadGenConfig(_Section):
    """``[loadgen]``: the LoadGen settings of a run. Units are in the names."""

    min_duration_ms: int = Field(default=600_000, ge=0)
    max_duration_ms: int = Field(default=0, ge=0, description="0 = no limit (debugging only)")
    min_query_count: int = Field(default=100, ge=1)
    performance_sample_count: int = Field(default=1024, ge=1)
    samples_per_query: int = Field(default=8, ge=1, description="MultiStream")
    target_latency_percentile: float = Field(default=99.0, gt=0, lt=100)
    latency_bound_ms: int = Field(default=10, ge=1, description="Server; LoadGen reads whole ms")
    target_qps: float = Field(default=100.0, gt=0, le=MAX_QPS, description="Server Poisson rate")
    expected_qps: float = Field(default=1000.0, gt=0, le=MAX_QPS,
                                description="Offline sizing hint")
    expected_latency_ms: float = Field(default=1.0, gt=0, description="SingleStream/MultiStream")
    coalesce_queries: bool = Field(
        default=False, description="Server: LoadGen issues the queries already due in one "
        "call (each keeps its own scheduled time, so its latency still counts from it)")
    enable_trace: bool = Field(
        default=False, description="write LoadGen's mlperf_log_trace.json (every query's "
        "issue and completion time, for `suite report --html`); costs throughput")


class SutConfig(_Section):
    """``[sut]``: how the system under test batches and schedules work."""

    max_batch_size: int = Field(default=64, ge=1, le=MAX_BATCH_SIZE,
                                description=f"samples per backend call, 1-{MAX_BATCH_SIZE:,}")
    max_wait_us: int = Field(
        default=-1, ge=-1,
        description="Server dynamic batching; -1 derives it from the latency bound and the "
        "batch latency measured at warm-up")
    pace_batches: bool = Field(
        default=True, description="Server, with max_wait_us = -1: space batches evenly "
        "across workers, at an interval derived at warm-up from the batch latency, the "
        "workers and target_qps (keeps workers from bunching behind a large fixed cost)")
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS,
                         description="worker threads (Offline, Server)")
    worker_model: Literal["threads", "processes"] = Field(
        default="threads", description="Server: workers as threads, or as processes with "
        "their own interpreters (the LoadGen process keeps only issuing and completing)")
    warmup_batches: int = Field(default=3, ge=0)
    watchdog_timeout_s: float = Field(default=60.0, gt=0, description="a batch older fails")
    # 1 s: a failed run ends within 2 s of its failure (a dead endpoint client included);
    # LoadGen, every sample answered, finishes in milliseconds unless it keeps Server's
    # schedule, which no grace would see through (a stop does not wait for it at all).
    drain_grace_s: float = Field(default=1.0, ge=0, description="after a failure's drain, "
                                 "how long LoadGen may take to finish")
    heartbeat_s: float = Field(default=0.25, gt=0)
    switch_interval_us: int = Field(
        default=0, ge=0, description="Python's GIL switch interval in the child (0: keep "
        "the interpreter's 5000 us); shorter hands the GIL to LoadGen's issue thread sooner")


class DataConfig(_Section):
    """``[data]``: a user-supplied dataset and model, and the preprocessing cache.

    Paths are made absolute when the config is resolved (the child process runs in
    its test directory). Empty means unset; the benchmark says whether it needs one.
    """

    dataset_dir: str = Field(default="", description="dataset directory (e.g. ImageNet val)")
    model_path: str = Field(default="", description="the model file, for user-supplied models")
    cache_dir: str = Field(default="", description="preprocessing cache; default <home>/cache")
    preprocess_workers: int = Field(default=0, ge=0, le=MAX_WORKERS,
                                    description=f"0: one per CPU core; at most {MAX_WORKERS}")
    layout: Literal["auto", "NCHW", "NHWC"] = Field(
        default="auto", description="input layout; auto: the model card's")


#: Why a ``--stand-in`` run is never submittable (result.json, the console, reports, and
#: ``suite check``'s unofficial verdict match this text).
STAND_IN_REASON = "stand-in: not the reference model or dataset"
#: The seed a card's stand-in is written with (``paths.stand_in_dir`` keys it).
STAND_IN_SEED = 0


class RunConfig(BaseModel):
    """The resolved, frozen configuration of one run, with provenance per key."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    benchmark: str
    scenario: Scenario
    mode: Mode
    backend: str
    round: str
    quick: bool
    runs_dir: Path
    loadgen: LoadGenConfig
    sut: SutConfig
    # a factory, not an instance: an instance built the model's validator at import
    data: DataConfig = Field(default_factory=DataConfig)
    backend_options: dict[str, Any]
    provenance: dict[str, str]
    overridden_rules: dict[str, str]
    #: A compliance test (``TEST01``...) this run performs, or None.
    compliance: str | None = None
    #: ``--stand-in``: the card's stand-in model and dataset (never submittable).
    stand_in: bool = False
    #: The system whose tuned settings were looked up (``scenarios/systems/<system>/``).
    system: str = ""
    #: The round's rules for this benchmark and scenario, resolved once by ``load_config``;
    #: in memory only (not in ``config.json`` or the child's spec, which need none).
    rules: RunRules | None = Field(default=None, exclude=True, repr=False)

    @property
    def resolved_rules(self) -> RunRules:
        """``rules``, or a ``ConfigError`` for a config that ``load_config`` did not make."""
        if self.rules is None:
            raise ConfigError("this run config carries no resolved rules",
                              hint="make it with suite.config.loader.load_config")
        return self.rules

    @property
    def non_submittable_reasons(self) -> list[str]:
        """Why a run with this config cannot be submitted (empty if it can)."""
        reasons = []
        if self.stand_in:
            reasons.append(STAND_IN_REASON)
        if self.quick:
            reasons.append("--quick shortens the run below the round's minimum duration")
        if self.backend == "simulated":
            reasons.append("the simulated backend runs no model: its timing is a profile "
                           "and its outputs a projection")
        reasons.extend(self.overridden_rules.values())
        return reasons

    @property
    def submittable(self) -> bool:
        return not self.non_submittable_reasons
