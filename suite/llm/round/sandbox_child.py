"""The program the LiveCodeBench sandbox runs in its child process: one answer, one test.

Never imported by the suite: ``sandbox`` reads this file's text and runs it with
``python -I -S -c``, in an empty directory, under the sandbox's limits. It reads one JSON
job from stdin (``code``, ``fn_name`` or none, ``input``, ``output``, ``nonce``), grades the
answer on that one test as LiveCodeBench's ``testing_util`` grades it (the reference's
``release_v1``/``release_v6`` runs at commit b1e7cab), and writes ``nonce`` and the verdict
as one JSON line on a copy of its original stdout; everything the answer writes to file
descriptors 1 and 2 goes to /dev/null.

The grading rules (facts of LiveCodeBench's harness, written here anew):

* the answer runs after the same star-import prelude and with
  ``sys.setrecursionlimit(50000)``; ``sys.set_int_max_str_digits(50000)``;
* the same functions are disabled before the answer runs (``os.fork``, ``os.system``,
  ``os.kill``, ``subprocess.Popen``, ``shutil.rmtree``...; ``resource`` and ``psutil`` not
  importable);
* **call-based** (a ``fn_name``): the prelude then the code, executed as a module; where the
  code contains ``class Solution`` the method is ``Solution().fn_name``; each input line is
  one JSON argument, the output one JSON value; a tuple result counts as a list; the test
  passes when the result ``==`` the output;
* **stdin/stdout**: a trailing ``if __name__ == '__main__':`` block is unwrapped; the
  imports stay at the top and every other statement becomes the body of one function; stdin
  is the test's input (``readline`` gives the next line without its newline, ``read`` and
  ``open(...)`` the whole input, ``sys.stdin.buffer`` the bytes; the object cannot be
  iterated, as theirs cannot); ``print`` output is captured; ``SystemExit`` ends the answer
  normally; the test passes when the stripped outputs have as many lines and each line is
  equal, or equal as a list of ``decimal.Decimal``.
"""

import ast
import contextlib
import io
import json
import os
import sys
from decimal import Decimal

_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
            "random", "statistics", "itertools", "functools", "operator", "io", "sys", "json")
PRELUDE = ("".join(f"from {m} import *\n" for m in (*_MODULES, "builtins", "typing"))
           + "".join(f"import {m}\n" for m in _MODULES) + "sys.setrecursionlimit(50000)\n")
_DISABLED = {"os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir",
                    "setuid", "fork", "forkpty", "killpg", "rename", "renames", "truncate",
                    "replace", "unlink", "fchmod", "fchown", "chmod", "chown", "chroot",
                    "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
             "shutil": ("rmtree", "move", "chown"), "subprocess": ("Popen",)}


def _disable() -> None:
    import builtins
    import shutil
    import subprocess

    os.environ["OMP_NUM_THREADS"] = "1"  # before putenv is disabled
    modules = {"os": os, "shutil": shutil, "subprocess": subprocess}
    for name, attributes in _DISABLED.items():
        for attribute in attributes:
            setattr(modules[name], attribute, None)
    builtins.quit = None  # type: ignore[assignment]
    builtins.help = None  # type: ignore[assignment]
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None  # type: ignore[assignment]


def _unparse(statements: list[ast.stmt] | list[ast.Import | ast.ImportFrom]) -> str:
    """Statements as source (what ``ast.unparse`` of the list gives)."""
    return ast.unparse(ast.Module(body=list(statements), type_ignores=[]))


def _unwrap_main(code: str) -> str:
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == \
                "__name__ == '__main__'":
            code = _unparse(tree.body[:-1]) + "\n" + _unparse(last.body)
    except Exception:
        pass
    return code


def _as_function(code: str) -> str:
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
        rest = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
        function = ast.FunctionDef(name="wrapped_function", args=ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=rest, decorator_list=[], lineno=-1)
        return PRELUDE + "\n" + _unparse(imports) + "\n" + ast.unparse(function)
    except Exception:
        return code


def _load(code: str) -> object:
    namespace: dict[str, object] = {"__name__": "tmp_sol"}
    exec(compile(code, "<answer>", "exec"), namespace)
    if "class Solution" in code:
        return namespace["Solution"]()  # type: ignore[operator]
    return type("Module", (), namespace)


class _Bytes:
    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")

    def read(self, *args: object) -> bytes:
        return self.data

    def readline(self, *args: object) -> bytes:
        return self.data.split(b"\n")[0] + b"\n"


class _Stdin:
    """stdin as their mock is: no ``__iter__``, every other attribute a StringIO's."""

    def __init__(self, text: str) -> None:
        self._text, self._io = text, io.StringIO(text)
        self._lines = iter(text.split("\n"))
        self.buffer = _Bytes(text)

    def read(self, *args: object) -> str:
        return self._text

    def readline(self, *args: object) -> str:
        return next(self._lines)

    def readlines(self, *args: object) -> list[str]:
        return self._text.split("\n")

    def __getattr__(self, name: str) -> object:
        return getattr(self._io, name)


def _stdio(code: str, given: str, expected: str) -> str:
    from unittest.mock import mock_open, patch

    method = getattr(_load(_as_function(_unwrap_main(code))), "wrapped_function", None)
    if method is None:
        return "runtime error: no wrapped_function"
    captured, saved = io.StringIO(), sys.stdout
    sys.stdout = captured
    try:
        with patch("builtins.open", mock_open(read_data=given)), \
                patch("sys.stdin", _Stdin(given)), contextlib.suppress(SystemExit):
            method()
    finally:
        sys.stdout = saved
    got = [line.strip() for line in captured.getvalue().strip().split("\n")]
    want = [line.strip() for line in expected.strip().split("\n")]
    if len(got) != len(want):
        return "wrong answer: mismatched output length"
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] == [Decimal(x) for x in b.split()]:
                continue
        except Exception:
            pass
        return "wrong answer"
    return "passed"


def _call(code: str, fn_name: str, given: str, expected: str) -> str:
    solution = _load(PRELUDE + "\n\n" + code)
    method = getattr(solution, fn_name, None)
    if method is None:
        return f"runtime error: no method {fn_name}"
    arguments = [json.loads(line) for line in given.split("\n")]
    result = method(*arguments)
    if isinstance(result, tuple):
        result = list(result)
    return "passed" if result == json.loads(expected) else "wrong answer"


def main() -> None:
    job = json.loads(sys.stdin.read())
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.set_int_max_str_digits(50000)
    import resource

    # here, not before exec: the sandbox's mount set-up starts processes of its own
    limit = int(job.get("processes", 1))
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    _disable()
    try:
        if job.get("fn_name"):
            verdict = _call(job["code"], job["fn_name"], job["input"], job["output"])
        else:
            verdict = _stdio(job["code"], job["input"], job["output"])
    except BaseException as exc:
        verdict = f"runtime error: {type(exc).__name__}"
    channel.write(json.dumps({"nonce": job["nonce"], "verdict": verdict}) + "\n")
    channel.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
