"""End to end from real digits runs: package -> check -> verify, determinism, and every
tamper making ``suite verify`` fail with a message naming the file or the reason."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suite.submission.bundle.dsse import sign
from suite.submission.bundle.statement import canonical, statement
from tests.conftest import run_cli
from tests.support import submission_fixtures as fx

Built = fx.Built


built = fx.built


env = fx.env


Members = dict[str, tuple[tarfile.TarInfo, bytes]]


def _read(bundle: Path) -> Members:
    with tarfile.open(bundle, "r:gz") as tar:
        return {m.name: (m, tar.extractfile(m).read()) for m in tar}  # type: ignore[union-attr]


def _write(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _verify(bundle: Path, pub: Path) -> tuple[int, str]:
    done = run_cli("verify", str(bundle), "--key", str(pub))
    return done.returncode, done.stdout + done.stderr


def test_package_check_verify_end_to_end(built: Built) -> None:
    assert "UNOFFICIAL" in built.package_output
    code, out = _verify(built.bundle, built.pub)
    assert code == 0 and "OK: signature valid" in out and "UNOFFICIAL" in out
    envelope = json.loads(_read(built.bundle)["attestation.dsse.json"][1])
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    done = run_cli("check", str(built.tree), "--json")
    assert done.returncode == 2  # quick runs are short: PERF-DURATION and friends
    rules = {f["rule"] for r in json.loads(done.stdout)["results"] for f in r["findings"]}
    assert "PERF-DURATION" in rules and "SYS-FIELDS" not in rules


def test_packing_twice_gives_identical_bytes(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "again"
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(built.runs), "--out-dir", str(out), "--key", str(built.key),
                   "--unofficial", "--system-config", str(built.home / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    assert (out / built.bundle.name).read_bytes() == built.bundle.read_bytes()


def test_official_packaging_refuses_quick_runs(built: Built, tmp_path: Path) -> None:
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(built.runs), "--out-dir", str(tmp_path), "--key", str(built.key), **env())
    assert done.returncode == 1
    assert "not submittable" in done.stderr or "--quick" in done.stderr


def _byte(m: Members, name: str) -> list[tuple[tarfile.TarInfo, bytes]]:
    data = bytearray(m[name][1])
    data[10] ^= 0x01
    return [(i, bytes(data) if n == name else d) for n, (i, d) in m.items()]


def _extra(m: Members, info: tarfile.TarInfo) -> list[tuple[tarfile.TarInfo, bytes]]:
    return [*m.values(), (info, b"hello")]


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _new_payload(m: Members) -> list[tuple[tarfile.TarInfo, bytes]]:
    env_ = json.loads(m["attestation.dsse.json"][1])
    env_["payload"] = base64.b64encode(canonical(statement({}, {"forged": True}))).decode()
    name = "attestation.dsse.json"
    return [(i, json.dumps(env_).encode() if n == name else d) for n, (i, d) in m.items()]


def _other_key(m: Members) -> list[tuple[tarfile.TarInfo, bytes]]:
    env_ = json.loads(m["attestation.dsse.json"][1])
    body = base64.b64decode(env_["payload"])
    forged = json.dumps(sign(body, Ed25519PrivateKey.generate())).encode()
    name = "attestation.dsse.json"
    return [(i, forged if n == name else d) for n, (i, d) in m.items()]


LOG = "closed/ORG/results/box/digits/Offline/performance/run_1/mlperf_log_detail.txt"


TAMPERS: dict[str, tuple[Callable[[Members], list[tuple[tarfile.TarInfo, bytes]]], str]] = {
    "one byte of a log": (lambda m: _byte(m, LOG), f"changed: {LOG}"),
    "an added file": (lambda m: _extra(m, _info("closed/ORG/extra.txt")),
                      "added: closed/ORG/extra.txt"),
    "a removed file": (lambda m: [v for n, v in m.items() if n != LOG], f"removed: {LOG}"),
    "a replaced payload": (_new_payload, "no valid signature from the given public key"),
    "another key": (_other_key, "no valid signature from the given public key"),
    "a ../ member": (lambda m: _extra(m, _info("../escape.txt")), "../escape.txt: unsafe"),
    "a symlink member": (lambda m: _extra(m, _info("closed/link", tarfile.SYMTYPE,
                                                   "/etc/passwd")),
                         "closed/link: not a regular file (symlink)"),
    "a duplicate member": (lambda m: [*m.values(), m[LOG]], f"{LOG}: duplicate member name"),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampering_fails_verification(tamper: str, built: Built, tmp_path: Path) -> None:
    make, expected = TAMPERS[tamper]
    bad = _write(tmp_path / "bad.tar.gz", make(_read(built.bundle)))
    code, out = _verify(bad, built.pub)
    assert code == 2, out
    assert expected in out and "FAILED" in out


def _as_full_length_run(run: Path) -> None:
    """Edit a quick run into what a full-length VALID run with audits leaves behind."""
    result = json.loads((run / "result.json").read_text())
    result.update(status="VALID", exit_code=0, submittable=True, non_submittable_reasons=[])
    for test in result["tests"]:
        test["status"] = "VALID"
    (run / "result.json").write_text(json.dumps(result))
    log = run / "performance/mlperf_log_detail.txt"
    fx.patch_log(log, {"effective_min_duration_ms": 600000, "result_validity": "VALID",
                       "early_stopping_met": True,
                       "result_99.00_percentile_latency_ns": 2_000_000})
    summary = run / "performance/mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Result is : INVALID", "Result is : VALID"))
    # A passing compliance run of each test, as `suite run --compliance` leaves it.
    for test, files in (("TEST01", ("verify_accuracy.txt", "verify_performance.txt")),
                        ("TEST04", ("verify_performance.txt",))):
        comp = run.parent / f"{run.name}_{test}"
        (comp / "performance").mkdir(parents=True)
        for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
            shutil.copyfile(run / "performance" / name, comp / "performance" / name)
        for name in files:
            (comp / name).write_text("TEST PASS\n")
        (comp / "result.json").write_text(json.dumps({
            **result, "run_id": comp.name, "run_dir": str(comp), "mode": test,
            "compliance": {"test": test, "reference_run": str(run), "passed": True,
                           "verdicts": {name: "TEST PASS" for name in files},
                           "evidence": {}, "attempt": 1, "previous_attempts": []}}))


def test_official_packaging_of_valid_runs(built: Built, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(built.runs, runs)
    for run in list(runs.iterdir()):
        _as_full_length_run(run)
    out = tmp_path / "out"
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
                   "--out-dir", str(out), "--key", str(built.key),
                   "--system-config", str(built.home / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    assert "UNOFFICIAL" not in done.stderr and "refused" not in done.stderr
    tree = out / "closed_ORG_box"
    assert (tree / fx.RESULTS / "Server/TEST04/verify_performance.txt").is_file()
    acc = tree / fx.RESULTS / "Offline/accuracy/mlperf_log_accuracy.json"
    assert acc.stat().st_size <= 10240
    assert run_cli("check", str(tree)).returncode == 0
    code, out_text = _verify(out / "closed_ORG_box.tar.gz", built.pub)
    assert code == 0 and "UNOFFICIAL" not in out_text
    envelope = json.loads(_read(out / "closed_ORG_box.tar.gz")["attestation.dsse.json"][1])
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert predicate["unofficial"] is False and predicate["check"]["passed"] is True
    row = next(r for r in predicate["results"] if r["scenario"] == "Offline")
    assert row["accuracy_met"] and row["loadgen_version"] and len(row["model_sha256"]) == 64


def test_sign_refuses_a_failing_tree_unless_unofficial(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "signed.tar.gz"
    args = ("sign", str(built.tree), "--out", str(out), "--key", str(built.key))
    assert run_cli(*args, **env()).returncode == 2 and not out.exists()
    assert run_cli(*args, "--unofficial", **env()).returncode == 0
    assert _verify(out, built.pub)[0] == 0



def _package_from(runs: Path, out: Path, built: Built) -> subprocess.CompletedProcess[str]:
    return run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
                   "--out-dir", str(out), "--key", str(built.key),
                   "--system-config", str(built.home / "system.toml"), **env())


def _full_length_runs(built: Built, runs: Path, *, digests: bool) -> None:
    shutil.copytree(built.runs, runs)
    for run in list(runs.iterdir()):
        _as_full_length_run(run)
    if not digests:
        return
    from suite.compliance.run import evidence_digests

    for comp in runs.glob("*_TEST0[14]"):  # what the verdict hashed, as a real run records
        result = json.loads((comp / "result.json").read_text())
        result["compliance"]["digests"] = evidence_digests(comp)
        (comp / "result.json").write_text(json.dumps(result))


def test_compliance_evidence_is_read_from_the_runs_dir_given(built: Built,
                                                              tmp_path: Path) -> None:
    # Issue 39: package copied TEST01/TEST04 files from the absolute path each record
    # named: a copy of the runs directory packaged the original's files, and with the
    # original moved away the copy could not be packaged at all.
    original, copy = tmp_path / "runs", tmp_path / "copy"
    _full_length_runs(built, original, digests=False)
    shutil.copytree(original, copy)
    shutil.move(original, tmp_path / "moved-away")
    out = tmp_path / "out"
    done = _package_from(copy, out, built)
    assert done.returncode == 0, done.stderr
    packaged = out / "closed_ORG_box" / fx.RESULTS / "Server/TEST04/verify_performance.txt"
    assert packaged.read_text() == "TEST PASS\n"


def test_compliance_evidence_changed_since_its_verdict_is_refused(built: Built,
                                                                  tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _full_length_runs(built, runs, digests=True)
    [comp] = list(runs.glob("*server*_TEST04"))
    (comp / "verify_performance.txt").write_text("edited after the verdict\nTEST PASS\n")
    done = _package_from(runs, tmp_path / "out", built)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verify_performance.txt: changed since the TEST04 verdict was written" in \
        done.stderr and "Traceback" not in done.stderr
