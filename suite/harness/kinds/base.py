"""What a kind of benchmark contributes to the one run pipeline (``suite.harness.run``).

The pipeline's stages are the same for every benchmark: pre-flight, run directory,
status, signals, full disk, system description, each LoadGen test in its child, scoring,
verdicts, ``result.json``. A ``KindStrategy`` supplies only what differs by kind:

* in the parent, ``prepare`` verifies the card's model and opens its dataset before a
  run directory exists, and returns the run's ``Prepared`` state, which scores accuracy
  (``score``) and plans the kind's compliance tests (``compliance``);
* in the child, ``build_sut`` loads the backend and builds the system under test that
  LoadGen drives;
* for packaging and the audit, ``packaged_model`` and ``local_model_digest`` say what the
  model is, as the kind knows it.

A strategy holds no state; ``Prepared`` holds one run's.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from suite.models import Kind, ModelIdentity

if TYPE_CHECKING:
    from suite.config.loader import ConfigRequest
    from suite.config.model import RunConfig
    from suite.harness.progress import ProgressCallback
    from suite.harness.sut.core import SystemUnderTest
    from suite.paths import Paths
    from suite.results import Claim, RunResult, TestResult


class CompliancePlan:
    """One compliance test of a run: its audit.config's lifetime and its verdict.

    ``judge_test`` sees each LoadGen test as its child returns (TEST06 decides the test's
    status from its accuracy log), ``judge_result`` the assembled result (TEST01 and TEST04
    compare it with their reference run); both are left as they are by default.
    """

    name: str = ""

    @contextlib.contextmanager
    def audit_config(self, test_dir: Path) -> Iterator[Path | None]:
        """The audit.config LoadGen reads for this test, removed however the test ends."""
        yield None

    def judge_test(self, test: TestResult, run_dir: Path) -> TestResult:
        return test

    def judge_result(self, result: RunResult, run_dir: Path) -> RunResult:
        return result


@dataclass
class Prepared(ABC):
    """One run's kind-specific state in the parent, from pre-flight to its verdicts."""

    #: What the model is (its sha256, or "" where an engine serves it), and its division.
    model: ModelIdentity
    #: The samples of the dataset at hand (the QSL's total count).
    dataset_size: int
    #: Why the kind makes the run not submittable (an open-division model, TLS unchecked).
    reasons: list[str] = field(default_factory=list)

    @abstractmethod
    def describe_dataset(self) -> dict[str, Any]:
        """The dataset's record (``dataset.json``, ``result.json``)."""

    @abstractmethod
    def compliance(self, config: RunConfig, paths: Paths,
                   request: ConfigRequest) -> CompliancePlan:
        """The plan of ``config.compliance`` (a test the kind does not run: ``ConfigError``)."""

    @abstractmethod
    def score(self, test: TestResult, config: RunConfig) -> TestResult:
        """The accuracy test's verdict from its accuracy log (a bad log fails the test)."""

    def provenance(self, tests: list[TestResult]) -> dict[str, Claim]:
        """What the run claims about its weights and their precision, with where each
        came from (``result.json`` ``provenance``). By default the suite ran the model
        itself: the weights are the file it hashed, the precision and quantization what
        the backend that computed recorded (measured). Left out where nothing was
        recorded: a missing record is never a claim."""
        from suite.results import MEASURED, NOT_RECORDED, Claim

        backend = tests[0].backend if tests else {}

        def recorded(key: str) -> Claim:
            value = str(backend.get(key) or "").strip()
            return Claim(value=value, source=MEASURED if value else NOT_RECORDED)

        return {"weights": Claim(value=self.model.sha256,
                                 source=MEASURED if self.model.sha256 else NOT_RECORDED),
                "precision": recorded("precision"),
                "quantization": recorded("weight_transformations")}


@dataclass
class BuiltSut:
    """What the child's ``build_sut`` gives: the system under test LoadGen drives, and
    the backend's record for ``status.json``."""

    sut: SystemUnderTest
    backend: dict[str, Any]
    #: What the backend counted during the run, read when the status is written.
    backend_run: Callable[[], dict[str, Any]] | None = None


class KindStrategy(ABC):
    """One kind of benchmark's part of the pipeline (see the module docstring)."""

    kind: ClassVar[Kind]
    #: The backend a card of this kind runs on when none is named.
    default_backend: ClassVar[str]
    #: What to say when a backend that does not serve this kind is named for it.
    backend_hint: ClassVar[str]
    #: ``suite tune`` for this kind: ``"module:function"`` taking ``(TuneOptions, *, say,
    #: paths)`` and returning a ``TuneReport`` (named, so choosing it imports nothing).
    tuner: ClassVar[str]
    #: Modules the child's ``build_sut`` imports: a child started early imports them while
    #: it waits for its spec (``kinds.preload``), overlapping the parent's pre-flight.
    child_modules: ClassVar[tuple[str, ...]] = ()
    #: Whether Server's latency bound is a query's (a tensor model) or the token latencies'.
    query_latency_bound: ClassVar[bool] = True

    @abstractmethod
    def prepare(self, config: RunConfig, paths: Paths,
                on_progress: Callable[[str], ProgressCallback | None] | None) -> Prepared:
        """Verify the model and open the dataset: everything before a run directory."""

    @abstractmethod
    def build_sut(self, home: Path, config: RunConfig, enter: Callable[[str], None],
                  on_drain: Callable[[], None]) -> BuiltSut:
        """In the child: the backend loaded and the SUT built (``enter`` names each setup
        stage after "loading model": "opening dataset", "warming up")."""

    @abstractmethod
    def packaged_model(self, paths: Paths, benchmark: str,
                       run: RunResult) -> tuple[str, str]:
        """(input data type, starting weights file) for a packaged result; "" where no
        record says (the checker then names it)."""

    @abstractmethod
    def local_model_digest(self, paths: Paths, benchmark: str) -> str:
        """The sha256 of the model this machine would run for ``benchmark`` (an audit's
        replay compares it with the bundle's); ``ModelError`` where it cannot."""
