"""``suite package`` and ``suite audit`` carry tinylm's results: real quick runs (Offline and
Interactive, performance + accuracy) through the real LoadGen, a real key, the real checker.

The packaged tree has the official layout (``tinylm/Offline``, ``tinylm/Interactive``, the
detail and summary logs, the ROUGE ``accuracy.txt`` with the full log's hash); the signed
predicate states each result's tokens/s with TTFT/TPOT p99, equal to the packaged detail
log's values; the audit recomputes ROUGE from the full accuracy log and fails a tree whose
accuracy.txt was edited; a replay compares tokens/s (never a timing gate: the tolerance
admits any VALID replay).
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest

from suite.logs import parse_detail_log
from suite.results import TOKEN_KEYS
from suite.submission.bundle.keys import load_public
from suite.submission.bundle.verify import verify_bundle
from tests.conftest import run_cli
from tests.support.submission_fixtures import SYSTEM_TOML, env
from tests.support.tinylm_runs import TinylmRuns

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")


RESULTS = "closed/ORG/results/box/tinylm"


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory, tinylm_runs: TinylmRuns
             ) -> dict[str, Path]:
    """The session's tinylm Offline and Interactive runs (tests/support/tinylm_runs.py),
    packaged and signed."""
    base = tmp_path_factory.mktemp("llm-package")
    runs, keys = tinylm_runs.runs, base / "keys"
    for name in ("offline", "interactive"):  # `suite run`'s exit code: VALID or INVALID
        assert tinylm_runs.results[name].exit_code in (0, 2), name
    assert run_cli("keygen", "--out", str(keys), **env()).returncode == 0
    (base / "system.toml").write_text(SYSTEM_TOML)
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
                   "--out-dir", str(base / "out"), "--key", str(keys / "signing.key"),
                   "--unofficial", "--system-config", str(base / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    return {"base": base, "runs": runs, "tree": base / "out" / "closed_ORG_box",
            "bundle": base / "out" / "closed_ORG_box.tar.gz", "key": keys / "signing.key",
            "pub": keys / "signing.pub"}


def test_the_tree_has_the_official_llm_layout(packaged: dict[str, Path]) -> None:
    tree = packaged["tree"]
    for scenario in ("Offline", "Interactive"):  # Interactive: not Server, its own directory
        result = tree / RESULTS / scenario
        for name in ("performance/run_1/mlperf_log_detail.txt",
                     "performance/run_1/mlperf_log_summary.txt", "accuracy/accuracy.txt",
                     "accuracy/mlperf_log_accuracy.json", "measurements.json", "user.conf"):
            assert (result / name).is_file(), f"{scenario}/{name}"
        measurements = json.loads((result / "measurements.json").read_text())
        assert measurements["starting_weights_filename"] == "tinylm_state_dict.pt"
        assert measurements["input_data_types"] == "int32"
        lines = (result / "accuracy/accuracy.txt").read_text().splitlines()
        scores = ast.literal_eval(lines[0])
        assert {"rouge1", "rouge2", "rougeL", "tokens_per_sample"} <= set(scores)
        full = packaged["tree"].parent.parent / "out" / "closed_ORG_box" / "evidence" / \
            RESULTS / scenario / "mlperf_log_accuracy.json"
        assert lines[-1] == f"hash={hashlib.sha256(full.read_bytes()).hexdigest()}"
        summary = (result / "performance/run_1/mlperf_log_summary.txt").read_text()
        assert "token" in summary.lower(), "the summary log carries LoadGen's token figures"
    assert not (tree / RESULTS / "Server").exists()


def test_the_predicate_states_tokens_per_second_and_token_latencies(
        packaged: dict[str, Path]) -> None:
    verification = verify_bundle(packaged["bundle"], load_public(packaged["pub"]))
    assert verification.ok
    claims = {r["scenario"]: r for r in verification.predicate["results"]}
    assert set(claims) == {"Offline", "Interactive"}
    for scenario, (metric, key) in {
            "Offline": ("tokens/s", "result_tokens_per_second"),
            "Interactive": ("completed tokens/s", "result_completed_tokens_per_second")}.items():
        values = parse_detail_log(packaged["tree"] / RESULTS / scenario /
                                  "performance/run_1/mlperf_log_detail.txt").values
        claim = claims[scenario]
        assert claim["metric"] == metric
        assert claim["value"] == float(values[key])  # type: ignore[arg-type]
        expected = {name: float(values[k]) for name, k in TOKEN_KEYS.items()  # type: ignore[arg-type]
                    if k in values}
        assert claim["tokens"] == expected
        if scenario == "Interactive":
            assert claim["tokens"]["ttft_p99_ns"] > 0 and claim["tokens"]["tpot_p99_ns"] > 0
        assert claim["accuracy"] == ast.literal_eval((
            packaged["tree"] / RESULTS / scenario / "accuracy/accuracy.txt"
        ).read_text().splitlines()[0])["rougeL"]


def _audit(bundle: Path, pub: Path, *extra: str) -> dict[str, object]:
    done = run_cli("audit", str(bundle), "--key", str(pub), "--json", *extra, timeout=900)
    assert done.returncode in (0, 2), done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _checks(report: dict[str, object], step: int) -> list[dict[str, object]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return [c for c in checks if c["step"] == step]


@pytest.fixture(scope="module")
def replayed(packaged: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, object]:
    """The audit of the honest bundle that also replays the Interactive result: every step
    it takes without ``--rerun`` (signature, checker, ROUGE recomputed) plus the replay, so
    one audit serves the tests of both."""
    # tolerance 0.99: any VALID replay passes, so this never gates on the machine's speed
    return _audit(packaged["bundle"], packaged["pub"], "--rerun", "Interactive",
                  "--tolerance", "0.99", "--runs-dir",
                  str(tmp_path_factory.mktemp("replays")))


def test_audit_recomputes_rouge_from_the_full_accuracy_log(replayed: dict[str, object]
                                                           ) -> None:
    accuracy = _checks(replayed, 3)
    assert len(accuracy) == 2
    for check in accuracy:
        assert check["passed"], check
        assert "rougeL" in " ".join(check["evidence"])  # type: ignore[arg-type]


def test_audit_fails_an_edited_accuracy_txt(packaged: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "closed_ORG_box"
    shutil.copytree(packaged["tree"], tree)
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    lines = txt.read_text().splitlines()
    scores = ast.literal_eval(lines[0])
    scores["rougeL"] = round(scores["rougeL"] + 1.0, 4)  # a better score than the log holds
    txt.write_text("\n".join([repr(scores), *lines[1:]]) + "\n")
    bundle = tmp_path / "edited.tar.gz"
    done = run_cli("sign", str(tree), "--out", str(bundle), "--key", str(packaged["key"]),
                   "--unofficial", **env())
    assert done.returncode == 0, done.stderr
    checks = {c["name"]: c for c in _checks(_audit(bundle, packaged["pub"]), 3)}
    offline = checks[f"accuracy of {RESULTS}/Offline"]
    assert not offline["passed"]
    assert "recomputed rougeL" in " ".join(offline["evidence"])  # type: ignore[arg-type]
    assert checks[f"accuracy of {RESULTS}/Interactive"]["passed"]


def test_audit_replays_an_llm_result_by_its_tokens_per_second(replayed: dict[str, object]
                                                              ) -> None:
    # The replay compares tokens/s with tokens/s and reports TTFT/TPOT.
    replay = next(c for c in _checks(replayed, 4) if str(c["name"]).startswith("replay of"))
    evidence = " ".join(replay["evidence"])  # type: ignore[arg-type]
    assert "(completed tokens/s)" in evidence, evidence
    assert "replay TTFT p99" in evidence and "replay TPOT p99" in evidence, evidence


def _detail(tree: Path, scenario: str) -> dict[str, object]:
    return parse_detail_log(tree / RESULTS / scenario /
                            "performance/run_1/mlperf_log_detail.txt").values


#: The official checker's LLM result fields (submission_checker ``get_result_key``).
LLM_FIELDS = {"Offline": ("tokens/s", "result_tokens_per_second"),
              "Interactive": ("completed tokens/s", "result_completed_tokens_per_second")}


def test_check_states_an_llm_result_by_its_tokens_per_second(packaged: dict[str, Path]) -> None:
    # `suite check` on the packaged tree (its JSON and its table) and on each run directory
    done = run_cli("check", str(packaged["tree"]), "--json")
    assert done.returncode in (0, 2), done.stderr
    results = {r["scenario"]: r for r in json.loads(done.stdout)["results"]}
    for scenario, (metric, key) in LLM_FIELDS.items():
        values = _detail(packaged["tree"], scenario)
        assert results[scenario]["metric"] == metric
        assert results[scenario]["value"] == float(values[key])  # type: ignore[arg-type]
        assert results[scenario]["value"] != float(  # type: ignore[arg-type]
            values["result_samples_per_second" if scenario == "Offline"
                   else "result_completed_samples_per_sec"])
    table = run_cli("check", str(packaged["tree"])).stdout
    assert "tokens/s" in table and "samples/s" not in table, table
    from suite.checker import check_path
    from suite.config.rules import load_rules
    from suite.paths import find_paths

    rules = load_rules(find_paths(), "v6.1")
    for run_dir in sorted(p for p in packaged["runs"].iterdir() if p.is_dir()):
        [res] = check_path(run_dir, rules).results
        want = LLM_FIELDS["Offline" if "offline" in run_dir.name else "Interactive"]
        values = parse_detail_log(run_dir / "performance/mlperf_log_detail.txt").values
        assert (res.metric, res.value) == (want[0], float(values[want[1]])), run_dir.name  # type: ignore[arg-type]


def test_sign_on_an_existing_tree_states_the_tokens(packaged: dict[str, Path],
                                                    tmp_path: Path) -> None:
    bundle = tmp_path / "resigned.tar.gz"
    done = run_cli("sign", str(packaged["tree"]), "--out", str(bundle), "--key",
                   str(packaged["key"]), "--unofficial", **env())
    assert done.returncode == 0, done.stderr
    verification = verify_bundle(bundle, load_public(packaged["pub"]))
    assert verification.ok
    claims = {r["scenario"]: r for r in verification.predicate["results"]}
    assert set(claims) == set(LLM_FIELDS)
    for scenario, (metric, key) in LLM_FIELDS.items():
        values = _detail(packaged["tree"], scenario)
        expected = {name: float(values[k]) for name, k in TOKEN_KEYS.items()  # type: ignore[arg-type]
                    if k in values}
        assert claims[scenario]["tokens"] == expected
        assert (claims[scenario]["metric"], claims[scenario]["value"]) == (
            metric, float(values[key]))  # type: ignore[arg-type]

