"""The wheel is the product: built from the repo, installed into a fresh venv, run from an
empty directory with no SUITE_HOME, it finds its own data and writes nothing into itself.

The fresh venv reuses this venv's site-packages for the dependencies (a ``.pth`` line: no
download of torch or onnxruntime); only the wheel itself is installed into it, without
build isolation, so the test works offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import REPO
from tests.support.timing import invalid_only_by_timing, timing_assert

DATA = ("run_rules", "scenarios", "reference_models")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("infersuite-*.whl")
    return built


def _tracked(folder: str) -> list[str]:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", folder], capture_output=True,
                            text=True, check=True).stdout.split()
    return sorted(listed)


def test_wheel_carries_every_tracked_data_file(wheel: Path) -> None:
    from suite import __version__

    assert wheel.name.startswith(f"infersuite-{__version__}-")  # one version, one place
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for folder in DATA:
            tracked = _tracked(folder)
            assert tracked, f"git lists nothing under {folder}/"
            for rel in tracked:
                inside = f"suite/_data/{rel}"
                assert inside in names, f"{rel} is missing from the wheel"
                # byte for byte: the sha256 on a model card must still match
                assert zf.read(inside) == (REPO / rel).read_bytes(), rel
        assert "suite/schemas/check-report.schema.json" in names
        assert "suite/py.typed" in names
        assert not [n for n in names if "__pycache__" in n
                    or n.startswith("suite/_data/scenarios/systems/")]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies come from this venv; the `suite` package must come from the wheel
    (Path(purelib) / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return env_dir


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUITE_HOME", "PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_CONFIG_HOME": str(home / "config"), "SUITE_KEY_PASSPHRASE": "wheel-test",
            "HOME": str(home)}
    return env


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
@pytest.mark.timing  # every quick demo test VALID depends on the machine's speed
def test_installed_wheel_runs_the_demo_from_an_empty_directory(installed: Path,
                                                                tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env, bin_dir = _env(home), installed / "bin"
    where = subprocess.run([str(bin_dir / "python"), "-c",
                            "import suite, suite.paths as p; print(suite.__file__); "
                            "print(p.find_paths().layout)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    package_file, layout = where.stdout.split()
    assert Path(package_file).is_relative_to(installed), package_file  # not the checkout
    assert layout == "installed"
    package = Path(package_file).parent
    before = _digest(package)

    demo = subprocess.run([str(bin_dir / "suite"), "demo", "--quick"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    # Whether every quick test is VALID depends on the machine's speed (issue 29: the demo
    # sizes its tests from what the machine showed), so a demo INVALID for a speed
    # condition alone is a timing miss (below); a failed test, an accuracy below its
    # target or LoadGen errors fail here.
    runs = home / "data" / "infersuite" / "runs"
    results = sorted(runs.glob("*/result.json"))  # a demo that broke early says why here
    assert len(results) == 4, demo.stdout[-3000:] + demo.stderr[-3000:]
    statuses = {json.loads(p.read_text())["status"] for p in results}
    assert statuses <= {"VALID", "INVALID"}, statuses
    speed = invalid_only_by_timing(RunResult.load(p) for p in results)  # or fails: not speed
    # The demo proves the install (suite/cli/commands/demo.py, demo_exit_code): every step
    # worked, so it exits 0, a test INVALID for speed alone included, which one line
    # explains by the machine's load
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert bool(speed) == ("INVALID" in statuses), speed
    assert bool(speed) == any(state in demo.stdout for state in (
        "the machine was busy", "the machine looked quiet")), demo.stdout[-2000:]
    assert list(work.iterdir()) == []  # the state went to the user's directories
    assert _digest(package) == before  # and nothing into the installed package

    check = subprocess.run([str(bin_dir / "suite"), "check", "--json", str(results[0].parent)],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120,
                           check=False)
    assert check.returncode in (0, 2), check.stderr  # a verdict, not an error
    assert json.loads(check.stdout)["results"], check.stdout[:500]

    keys = subprocess.run([str(bin_dir / "suite"), "keygen", "--out", str(home / "keys")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert keys.returncode == 0, keys.stderr
    package_run = subprocess.run(
        [str(bin_dir / "suite"), "package", "--submitter", "Org", "--system", "box",
         "--unofficial", "--key", str(home / "keys" / "signing.key")],
        cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert package_run.returncode == 0, package_run.stdout[-2000:] + package_run.stderr[-2000:]
    bundles = list((home / "data" / "infersuite" / "submissions").glob("*.tar.gz"))
    assert len(bundles) == 1, package_run.stderr
    assert _digest(package) == before
    invalid = [line for line in demo.stdout.splitlines() if "INVALID because" in line]
    timing_assert(not speed, "the demo's quick tests were INVALID on this machine: "
                  f"{' | '.join(invalid or speed)[:500]}")
