"""Running a LiveCodeBench answer's tests, each in a contained child process.

The answer is code a model wrote: it never runs in the suite's process. Each test runs
``sandbox_child`` (the grading rules) in a fresh ``python -I -S`` process:

* its own new, empty temporary directory as its working directory, removed afterwards;
* ``RLIMIT_CPU`` (CPU seconds), ``RLIMIT_AS`` (address space), ``RLIMIT_FSIZE`` (the largest
  file it may write) and ``RLIMIT_NPROC`` (processes of its user);
* a new session (process group), killed as a whole when the wall-clock limit passes or the
  test ends;
* where ``unshare`` works (root, or unprivileged user namespaces): new user, mount and
  network namespaces, with no network interface but a down loopback, and every mount
  read-only but the test's own directory.

What it does not isolate: without ``unshare`` the network and the file system are the
user's (``Isolation`` says which held); as root, the kernel does not apply ``RLIMIT_NPROC``
(the child's functions that start processes are disabled as the reference disables them,
and the process group is killed at the end); memory other than the address space (such as
``/dev/shm`` where it is a separate mount, which stays writable); CPU time of other
processes; reading files the user can read; and the answer can, in its own process, forge
its verdict line (it can read the nonce): this contains a hostile answer, it does not stop
one that cheats.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_CHILD = Path(__file__).with_name("sandbox_child.py")
#: Inside the namespaces: the test's directory stays writable, every other mount is made
#: read-only (a mount that refuses is left as it is), then the child is run.
_CONTAIN = ('mount --bind "$0" "$0" || exit 97; '
            "for m in $(awk '$4 !~ /^ro/ {print $2}' /proc/self/mounts); do "
            '[ "$m" = "$0" ] || mount -o remount,ro,bind "$m" 2>/dev/null; done; '
            'cd "$0" && exec "$@"')


@dataclass(frozen=True)
class Limits:
    """One test's limits (the reference gives each test 60 s; it sets no memory limit)."""

    wall_s: float = 60.0
    cpu_s: int = 60
    memory_bytes: int = 4 << 30
    file_bytes: int = 16 << 20
    processes: int = 1


@dataclass(frozen=True)
class Isolation:
    namespaces: bool
    detail: str


@functools.cache
def isolation() -> Isolation:
    """Whether new user, mount and network namespaces can be made here (checked once)."""
    tool = shutil.which("unshare")
    if tool is None:
        return Isolation(False, "no unshare tool: network and file system not isolated")
    probe = Path(tempfile.mkdtemp(prefix="suite-lcb-probe-"))
    try:  # the whole set-up (mount, awk), as each test makes it
        done = subprocess.run([tool, "-rmn", "sh", "-c", _CONTAIN, str(probe), "true"],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Isolation(False, f"unshare failed ({exc}): network and file system not isolated")
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        return Isolation(False, f"unshare -rmn refused ({reason[0]}): network and file "
                         "system not isolated")
    return Isolation(True, "user, mount and network namespaces; mounts read-only")


def _limit(limits: Limits) -> None:
    """In the child, before exec: the resource limits (``RLIMIT_NPROC``: the child sets it
    itself, once the sandbox's own set-up has started its processes)."""
    import resource

    for kind, value in ((resource.RLIMIT_CPU, limits.cpu_s),
                        (resource.RLIMIT_AS, limits.memory_bytes),
                        (resource.RLIMIT_FSIZE, limits.file_bytes),
                        (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(kind, (value, value))


def run_test(code: str, fn_name: str | None, given: str, expected: str,
             limits: Limits = Limits()) -> str:
    """``"passed"`` or why the test failed (a wrong answer, an error, a limit)."""
    nonce = secrets.token_hex(16)
    job = json.dumps({"code": code, "fn_name": fn_name, "input": given, "output": expected,
                      "nonce": nonce, "processes": limits.processes})
    program = [sys.executable, "-I", "-S", "-c", _CHILD.read_text(encoding="utf-8")]
    workdir = Path(tempfile.mkdtemp(prefix="suite-lcb-"))
    contained = isolation().namespaces
    command = (["unshare", "-rmn", "sh", "-c", _CONTAIN, str(workdir), *program]
               if contained else program)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir)}
    try:
        child = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True,
                                 preexec_fn=functools.partial(_limit, limits))
        try:
            out, _ = child.communicate(job.encode("utf-8"), timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            return "time limit: killed after the wall-clock limit"
        finally:
            _kill_group(child)
        if child.returncode == -signal.SIGXCPU or child.returncode == -signal.SIGKILL:
            return "time limit: CPU limit"
        if contained and child.returncode == 97:
            return "sandbox error: the test directory could not be mounted"
        for line in out.decode("utf-8", "replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("nonce") == nonce:
                return str(record.get("verdict", "no verdict"))
        return f"runtime error: the child ended ({child.returncode}) without a verdict"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """Kill the child's whole process group (what it started goes too), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def run_tests(code: str, fn_name: str | None, tests: list[tuple[str, str]],
              limits: Limits = Limits()) -> tuple[bool, str]:
    """Every test in turn, stopping at the first that fails (as the reference does)."""
    if not tests:
        return False, "no tests"
    for index, (given, expected) in enumerate(tests):
        verdict = run_test(code, fn_name, given, expected, limits)
        if verdict != "passed":
            return False, f"test {index}: {verdict}"
    return True, f"passed {len(tests)} tests"
