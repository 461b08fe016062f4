"""What an endpoint run claims, and where each claim came from (issue 36, items 1-2).

The real LoadGen, the real CLI, the synthetic streaming endpoint on loopback
(``suite.serve.synthetic_llm``: it reports itself as engine ``synthetic``, version
``synthetic-1``, and names no weights), real keys and signatures. The suite cannot see a
remote engine's weights, so a run records no local file's hash for them: what the
submitter states (``backend.openai.stated_*``) is marked "stated by the submitter, not
verified", what the engine said "reported by the engine", in ``result.json``,
``measurements.json``, the bundle's ``documentation/provenance.json`` and the audit. The
system of an endpoint result is the engine's host, which the submitter describes; the
packaging host is never probed for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.llm.card import load_llm_card
from suite.paths import find_paths
from suite.results import RunResult
from tests.conftest import run_cli
from tests.support.llm_endpoints import synthetic
from tests.support.submission_fixtures import SYSTEM_TOML, env

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")

STATED = "stated by the submitter, not verified"
ENGINE = "reported by the engine"
#: the engine's host, as its submitter describes it (not this machine)
ENGINE_HOST = SYSTEM_TOML + 'host_processor_model_name = "Engine Host CPU 9000"\n'


def _sha() -> str:
    return load_llm_card(find_paths(), "tinylm").model.torch_state_dict_sha256


def _run(url: str, runs: Path, *extra: str) -> RunResult:
    done = run_cli("run", "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                   "--quick", "--scenario", "offline", "--runs-dir", str(runs),
                   "--set", "loadgen.min_query_count=64", *extra, timeout=300)
    assert done.returncode in (0, 2), done.stdout + done.stderr
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return RunResult.load(run_dir / "result.json")


def test_an_unstated_endpoint_run_records_no_local_hash_and_is_open(tmp_path: Path) -> None:
    with synthetic("--tokens", "8") as (url, _):
        result = _run(url, tmp_path, "--mode", "performance")
    assert result.model_sha256 == ""  # never the local reference file's hash
    assert result.model_sha256 != _sha()
    assert result.division == "open"
    assert any("stated_weights_sha256" in r for r in result.non_submittable_reasons)
    assert any("stated_precision" in r for r in result.non_submittable_reasons)
    claims = {k: (c.value, c.source) for k, c in result.provenance.items()}
    assert claims["weights"] == ("", "not recorded")
    assert claims["precision"] == ("", "not recorded")
    assert claims["engine"] == ("synthetic synthetic-1", ENGINE)
    assert claims["weights_location"] == ("", "not recorded")  # its /v1/models names none
    [test] = result.tests
    assert test.backend["precision"] == "" and test.backend["weight_transformations"] == ""
    assert test.backend["details"]["server_location"] == "loopback"


def test_a_stated_endpoint_bundle_says_where_each_claim_came_from(tmp_path: Path) -> None:
    runs, keys, out = tmp_path / "runs", tmp_path / "keys", tmp_path / "out"
    assert run_cli("keygen", "--out", str(keys), **env()).returncode == 0
    (tmp_path / "engine-host.toml").write_text(ENGINE_HOST)
    stated = ["--set", f'backend.openai.stated_weights_sha256="{_sha()}"',
              "--set", 'backend.openai.stated_precision="fp32"',
              "--set", 'backend.openai.stated_quantization="none"']
    with synthetic("--tokens", "8") as (url, _):
        result = _run(url, runs, "--mode", "all", *stated)
        assert (result.model_sha256, result.model_sha256_source) == (_sha(), STATED)
        assert result.division == "closed"
        assert {k: c.source for k, c in result.provenance.items()} == {
            "weights": STATED, "precision": STATED, "quantization": STATED,
            "engine": ENGINE, "weights_location": "not recorded"}
        package = ["package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(runs), "--out-dir", str(out), "--key", str(keys / "signing.key"),
                   "--unofficial"]
        # the engine's host cannot be probed from here: the submitter must describe it
        refused = run_cli(*package, **env())
        assert refused.returncode != 0
        assert "engine's host" in refused.stdout + refused.stderr
        done = run_cli(*package, "--system-config", str(tmp_path / "engine-host.toml"),
                       **env())
        assert done.returncode == 0, done.stdout + done.stderr
        tree, bundle = out / "closed_ORG_box", out / "closed_ORG_box.tar.gz"
        result_dir = tree / "closed/ORG/results/box/tinylm/Offline"
        measurements = json.loads((result_dir / "measurements.json").read_text())
        assert measurements["weight_data_types"] == "fp32"
        assert measurements["provenance"] == {
            "starting_weights_filename": "not recorded", "retraining": STATED,
            "weight_data_types": STATED, "weight_transformations": STATED}
        system = json.loads((tree / "closed/ORG/systems/box.json").read_text())
        assert system["host_processor_model_name"] == "Engine Host CPU 9000"
        assert system["framework"] == "synthetic synthetic-1"  # as the engine reported
        provenance = json.loads((tree / "closed/ORG/documentation/provenance.json")
                                .read_text())
        assert provenance["system"]["source"] == STATED
        assert provenance["system"]["framework"] == {"value": "synthetic synthetic-1",
                                                     "source": ENGINE}
        audited = run_cli("audit", str(bundle), "--key", str(keys / "signing.pub"), "--json",
                          "--rerun", "Offline", "--tolerance", "0.99", "--runs-dir",
                          str(tmp_path / "replays"), timeout=600)
    report = json.loads(audited.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    claims = checks["provenance of closed/ORG/results/box/tinylm/Offline"]
    assert f"weights: {_sha()} ({STATED})" in claims["evidence"]
    assert f"precision: fp32 ({STATED})" in claims["evidence"]
    assert f"engine: synthetic synthetic-1 ({ENGINE})" in claims["evidence"]
    assert checks["system vs closed/ORG/systems/box.json"]["found"] == STATED
    replay = checks["replay of closed/ORG/results/box/tinylm/Offline"]
    # the replay compared no local hash: it says the weights are not verified
    assert any("not verified by the replay" in line for line in replay["evidence"]), replay
    assert not any("local model" in line for line in replay["evidence"]), replay
    assert replay["passed"], replay  # the same engine answered the replay
