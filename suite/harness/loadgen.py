"""The only module that imports ``mlperf_loadgen``.

It builds ``TestSettings`` from the conf files ``settings`` wrote, runs one test
with a ``ConstructFastSUT`` and a QSL, and completes samples in batches. The rules
it enforces come from LoadGen's measured behaviour (measured on mlcommons-loadgen 6.0.17):

* ``FromConfig`` loads the embedded ``mlperf.conf`` only on its first user.conf call
  per process, so we load it explicitly (``conf_type=0``), then our files with
  ``conf_type=2``, which neither trips that counter nor logs an error;
* the output directory must exist before ``StartTest``, or LoadGen silently runs
  nothing and aborts the process at exit;
* ``audit_config_filename`` is always passed explicitly (``""`` disables it), so a
  stray ``audit.config`` in the working directory can never change a run;
* response data only has to live until ``QuerySamplesComplete`` returns (LoadGen
  copies logged payloads inside the call), and ``size`` is in bytes;
* the trace log is off unless ``loadgen.enable_trace`` asks for it: it costs 12-31 %
  throughput and is not valid JSON (``suite.reports.html`` reads its samples line by line).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np
import numpy.typing as npt

from suite.errors import RunFailed
from suite.harness.settings import LoadGenSettings

_SCENARIOS = {
    "SingleStream": lg.TestScenario.SingleStream,
    "MultiStream": lg.TestScenario.MultiStream,
    "Server": lg.TestScenario.Server,
    "Offline": lg.TestScenario.Offline,
}
_MODES = {"performance": lg.TestMode.PerformanceOnly, "accuracy": lg.TestMode.AccuracyOnly}

IssueCallback = Callable[[list[int], list[int]], None]


def build_test_settings(settings: LoadGenSettings, test_dir: Path) -> Any:
    """``TestSettings`` from the embedded mlperf.conf, then our mlperf.conf and user.conf."""
    ts = lg.TestSettings()
    model, scenario = settings.loadgen_model, settings.scenario
    ts.FromConfig("", model, scenario, 0)  # embedded mlperf.conf: path is ignored
    for path in (settings.mlperf_conf, settings.user_conf):
        rc = ts.FromConfig(path, model, scenario, 2)
        if rc != 0:
            raise RunFailed(
                f"LoadGen rejected {path} (FromConfig returned {rc})",
                run_dir=test_dir,
                hint="LoadGen wants 'key = value' with spaces and '#' only as a whole token",
            )
    ts.scenario = _SCENARIOS[scenario]
    ts.mode = _MODES[settings.mode]
    ts.qsl_rng_seed = settings.qsl_rng_seed
    ts.sample_index_rng_seed = settings.sample_index_rng_seed
    ts.schedule_rng_seed = settings.schedule_rng_seed
    return ts


def run_test(
    settings: LoadGenSettings,
    test_dir: Path,
    issue: IssueCallback,
    flush: Callable[[], None],
    qsl_total: int,
    qsl_performance: int,
    load: Callable[[list[int]], None],
    unload: Callable[[list[int]], None],
    audit_config: Path | None = None,
    sut_name: str | None = None,
) -> None:
    """Run one LoadGen test to completion; logs land in ``test_dir``.

    Call it once per process: LoadGen cannot run another test after a failed one.
    ``sut_name`` names the SUT in the logs (``sut_name``); LoadGen's Python binding
    offers that only through its query dispatch library (``ConstructQDL``), whose
    issue callback receives ``QuerySample`` objects. A network-division run must
    name itself (the submission checker looks for "Network SUT" in it).
    """
    test_dir.mkdir(parents=True, exist_ok=True)
    test_settings = build_test_settings(settings, test_dir)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(test_dir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = settings.enable_trace  # opt-in: loadgen.enable_trace
    if sut_name is None:
        sut, destroy = lg.ConstructFastSUT(issue, flush), lg.DestroyFastSUT
    else:
        def issue_samples(samples: list[Any]) -> None:
            issue([sample.id for sample in samples], [sample.index for sample in samples])

        sut, destroy = lg.ConstructQDL(issue_samples, flush, lambda: sut_name), lg.DestroyQDL
    qsl = lg.ConstructQSL(qsl_total, qsl_performance, load, unload)
    try:
        lg.StartTestWithLogSettings(
            sut, qsl, test_settings, log_settings, str(audit_config) if audit_config else ""
        )
    finally:
        lg.DestroyQSL(qsl)
        destroy(sut)


class Completer:
    """Completes samples in one ``QuerySamplesComplete`` call per batch.

    A batch's responses are one value of ``response_dtype`` per sample (what
    ``postprocess`` returns); LoadGen copies a response's bytes only for logged samples
    and only during the call, so they only have to outlive it.

    Building a ``QuerySampleResponse`` is the binding's main per-sample cost (about
    0.6 us, measured). The call copies the list into
    a C++ vector before it releases the GIL, so the objects can be reused as soon as it
    returns: each thread keeps a pool whose ``data`` points at the slots of its own
    payload buffer, copies a batch's responses there and only rewrites the ids (about
    0.15 us each). Even for one sample this beats reading the array's address
    (``.ctypes.data`` alone costs about 1.7 us).
    """

    def __init__(self, response_dtype: np.dtype[Any]) -> None:
        self.dtype = np.dtype(response_dtype)
        self.row_nbytes = self.dtype.itemsize
        self._zeros = np.zeros(max(self.row_nbytes, 1), dtype=np.uint8)
        self.completed = 0
        self._local = threading.local()
        self._single: tuple[Any, ...] = ()

    def complete(self, ids: Sequence[int], responses: npt.NDArray[Any]) -> None:
        """Complete ``ids[k]`` with ``responses[k]``."""
        n = len(ids)
        local = self._local
        pool: list[Any] | None = getattr(local, "pool", None)
        if pool is None or len(pool) < n:
            pool = self._grow(n)
        if n == 1:  # SingleStream: no slice and no loop (0.6 us less per query, measured)
            local.slots[0] = responses[0]
            first: list[Any] = local.first
            first[0].id = ids[0]
            lg.QuerySamplesComplete(first)
        else:
            local.slots[:n] = responses
            for response, qid in zip(pool, ids, strict=False):  # stops at len(ids)
                response.id = qid
            lg.QuerySamplesComplete(pool if n == len(pool) else pool[:n])
        self.completed += n

    def _grow(self, n: int) -> list[Any]:
        """A larger pool for this thread: a new payload and responses pointing at it."""
        local = self._local
        old: list[Any] | None = getattr(local, "pool", None)
        stride = self.row_nbytes
        capacity = max(n, 2 * len(old) if old else n)
        slots = np.zeros(max(capacity, 1), dtype=self.dtype)
        base = slots.ctypes.data
        local.slots = slots
        local.pool = pool = list(map(
            lg.QuerySampleResponse, repeat(0, capacity),
            range(base, base + capacity * stride, stride), repeat(stride, capacity)))
        local.first = pool[:1]
        return pool

    def single_index(self) -> tuple[npt.NDArray[np.int64], Callable[[int], None]] | None:
        """``(slot, complete_one)`` for one caller that completes one sample at a time
        (INLINE dispatch, on LoadGen's issue thread): write the sample's class index
        into ``slot`` (one int64), then ``complete_one(id)`` sends it. None where the
        response is not an integer of at most 8 bytes on a little-endian machine.

        The response is the slot's first ``row_nbytes`` bytes: on a little-endian
        machine those are the int64's value in the narrower two's-complement integer
        whenever it fits, as a class index does (``postprocess.index_writer`` writes
        it with numpy's ``out=``). A pool of one, bound here, so no thread-local
        lookup, no response array and no row copy per query.
        """
        if self.dtype.kind not in "iu" or self.row_nbytes > 8 or sys.byteorder != "little":
            return None
        slot = np.zeros(1, dtype=np.int64)
        response = [lg.QuerySampleResponse(0, slot.ctypes.data, self.row_nbytes)]
        first, complete = response[0], lg.QuerySamplesComplete

        def complete_one(qid: int) -> None:
            first.id = qid
            complete(response)
            self.completed += 1

        self._single = slot, response  # the payload and response outlive every call
        return slot, complete_one

    def complete_empty(self, ids: Sequence[int]) -> None:
        """Complete ``ids`` with all-zero payloads (a failed or drained batch)."""
        address, size = self._zeros.ctypes.data, self.row_nbytes
        for start in range(0, len(ids), 4096):  # bounded lists: a drain can be millions
            chunk = ids[start:start + 4096]
            n = len(chunk)
            lg.QuerySamplesComplete(list(map(
                lg.QuerySampleResponse, chunk, repeat(address, n), repeat(size, n))))
            self.completed += n


class BytesCompleter(Completer):
    """Completes samples whose responses are bytes of any length (a task card's
    ``TensorTask.response``), one ``QuerySamplesComplete`` call per batch: the batch's
    bytes are joined into one buffer that outlives the call. A failed or drained sample
    is answered with one zero byte (``complete_empty``)."""

    def __init__(self) -> None:
        super().__init__(np.dtype(np.uint8))

    def complete(self, ids: Sequence[int], responses: Sequence[bytes]) -> None:  # type: ignore[override]
        """Complete ``ids[k]`` with ``responses[k]``, with its output-token count where the
        responses carry ``n_tokens`` (a task under LoadGen's token latencies: whisper).
        A batch packed in one buffer (``payload`` and ``offsets``: ``tasks.base.Packed``)
        is answered in place: no join, no bytes object per sample."""
        if hasattr(responses, "payload"):
            self._complete_packed(ids, responses)
        else:
            self._complete_bytes(ids, responses)

    def _complete_packed(self, ids: Sequence[int], packed: Any) -> None:
        """A ``Packed`` batch. Equal-sized rows at the address of this thread's previous
        batch (a task packs into its thread's reused buffer) reuse that batch's response
        objects, rewriting only the ids, as ``Completer`` does (1.8 us a sample to build
        one, measured on the 2-core machine)."""
        payload: npt.NDArray[np.uint8] = packed.payload
        offsets: npt.NDArray[np.int64] = packed.offsets
        row, n, local = int(packed.row_bytes), len(ids), self._local
        base = payload.ctypes.data if payload.size else self._zeros.ctypes.data
        pool: list[Any] | None = getattr(local, "packed", None)
        if row and pool is not None and local.packed_at == (base, row) and len(pool) >= n:
            for response, qid in zip(pool, ids, strict=False):  # stops at len(ids)
                response.id = qid
            lg.QuerySamplesComplete(pool if n == len(pool) else pool[:n])
        else:
            made = list(map(lg.QuerySampleResponse, ids, (offsets[:-1] + base).tolist(),
                            np.diff(offsets).tolist()))
            if row:
                local.packed, local.packed_at = made, (base, row)
            lg.QuerySamplesComplete(made)
        self.completed += n

    def _complete_bytes(self, ids: Sequence[int], responses: Sequence[bytes]) -> None:
        sizes = [len(r) for r in responses]
        counts: Sequence[int] | None = getattr(responses, "n_tokens", None)
        payload = np.frombuffer(b"".join(responses) or b"\0", dtype=np.uint8)
        base, offset, out = payload.ctypes.data, 0, []
        for k, (qid, size) in enumerate(zip(ids, sizes, strict=True)):
            out.append(lg.QuerySampleResponse(qid, base + offset, size) if counts is None
                       else lg.QuerySampleResponse(qid, base + offset, size, counts[k]))
            offset += size
        lg.QuerySamplesComplete(out)
        self.completed += len(out)

    def single_index(self) -> None:
        """No in-place index path: responses are bytes."""
        return None


class TokenCompleter:
    """LLM completions (``use_token_latencies``): int32 token ids, with ``n_tokens``.

    ``first_token`` is LoadGen's ``FirstTokenComplete`` (the time to first token);
    ``complete`` is ``QuerySamplesComplete`` with the 4-argument response whose
    ``n_tokens`` LoadGen divides the rest of the latency by (TPOT). Payloads only have
    to outlive the call, as for ``Completer``.
    """

    def __init__(self) -> None:
        self.completed = 0

    def first_token(self, qid: int, token: int) -> None:
        payload = np.array([token], dtype=np.int32)
        lg.FirstTokenComplete([lg.QuerySampleResponse(qid, payload.ctypes.data, 4)])

    def complete(self, items: Sequence[tuple[int, Sequence[int]]]) -> None:
        """Complete each (query id, generated token ids)."""
        payloads = [np.asarray(tokens, dtype=np.int32) for _, tokens in items]
        lg.QuerySamplesComplete([
            lg.QuerySampleResponse(qid, p.ctypes.data, p.nbytes, len(p))
            for (qid, _), p in zip(items, payloads, strict=True)])
        self.completed += len(items)

    def complete_response(self, qid: int, data: bytes, n_tokens: int) -> None:
        """Complete ``qid`` with a recorded response (a tool-calling card's JSON,
        ``suite.llm.endpoint.tool_calls``) and its output token count."""
        payload = np.frombuffer(data, dtype=np.uint8)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, payload.ctypes.data,
                                                        payload.nbytes, n_tokens)])
        self.completed += 1

    def complete_empty(self, ids: Sequence[int]) -> None:
        """Complete ``ids`` with no tokens (a failed or drained sample; LoadGen logs each)."""
        for start in range(0, len(ids), 4096):
            chunk = ids[start:start + 4096]
            lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, 0, 0, 0) for qid in chunk])
            self.completed += len(chunk)


def loadgen_version() -> str:
    """The installed LoadGen's version string, without importing anything else."""
    from importlib.metadata import version

    return version("mlcommons-loadgen")
