"""MATH500 answer equivalence as the round's reference grades it (PRM800K's grader).

deepseek-r1's and gpt-oss-120b's ``evaluate_math500`` call ``grading.grader.grade_answer``
of openai/prm800k (the submodule at 7ecc794): an answer is correct when

1. Hendrycks' MATH normalisation (``math_normalize.normalize_answer``) of both is equal; or
2. PRM800K's own normalisation of both is equal; or
3. split as tuples or intervals, element by element: two plain fractions must be equal as
   written, an integer against a non-integer is wrong, and otherwise sympy must simplify
   ``(truth)-(given)`` to 0 (not tried for expressions with more than two unknown letters
   or exponents written ``^{``, ``^(``, ``^N^`` or ``^NN``).

The rules are reimplemented here from the grader's behaviour; the LaTeX-to-text step is the
same library the grader uses (``pylatexenc``) and the algebra the same (``sympy``), both
imported when first needed (the ``reasoning`` extra). ``grade_answer`` equals the
reference's on the fixtures of ``tests/unit/llm/test_reasoning_scoring.py``.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from suite.errors import SuiteError
from suite.paths import install_hint

_UNITS = ("degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day",
          "week", "month", "year", "foot", "feet", "inch", "yard")
_TUPLE = "()[]"


def _needs(package: str) -> SuiteError:
    return SuiteError(f"grading MATH500 answers as the reference does needs {package}",
                      hint=install_hint("reasoning"))


# ---------------------------------------------------------------- Hendrycks' MATH rules
def _fix_fracs(text: str) -> str:
    parts = text.split("\\frac")
    out = parts[0]
    for part in parts[1:]:
        out += "\\frac"
        if part[0] == "{":  # an empty part raises: the caller keeps the answer as it is
            out += part
        elif len(part) < 2:
            return text
        elif part[1] != "{":
            out += "{" + part[0] + "}{" + part[1] + "}" + part[2:]
        else:
            out += "{" + part[0] + "}" + part[1:]
    return out


def _fix_a_slash_b(text: str) -> str:
    halves = text.split("/")
    if len(halves) != 2:
        return text
    try:
        a, b = int(halves[0]), int(halves[1])
    except ValueError:
        return text
    return "\\frac{" + str(a) + "}{" + str(b) + "}" if text == f"{a}/{b}" else text


def _fix_sqrt(text: str) -> str:
    if "\\sqrt" not in text:
        return text
    parts = text.split("\\sqrt")
    out = parts[0]
    for part in parts[1:]:
        # part[0] of an empty part raises, as theirs does
        out += "\\sqrt" + part if part[0] == "{" else "\\sqrt{" + part[0] + "}" + part[1:]
    return out


def _strip_string(text: str) -> str | None:
    for old, new in (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"),
                     ("dfrac", "frac"), ("\\left", ""), ("\\right", ""), ("^{\\circ}", ""),
                     ("^\\circ", ""), ("\\$", "")):
        text = text.replace(old, new)
    if "\\text{ " in text:  # units on the right; more than one such part raises
        parts = text.split("\\text{ ")
        if len(parts) != 2:
            return None  # theirs fails an assertion here: the answer stays as it is
        text = parts[0]
    text = text.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        text = sides[1]
    text = _fix_fracs(_fix_sqrt(text).replace(" ", ""))
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _fix_a_slash_b(text)


def normalize_mathd(answer: str) -> str:
    """Hendrycks' MATH ``normalize_answer`` (an error keeps the answer as it is)."""
    answer = answer.strip()
    try:
        match = re.search(r"^\\text\{(?P<text>.+?)\}$", answer)
        if match is not None:
            answer = match.group("text").strip()
        stripped = _strip_string(answer)
    except IndexError:
        return answer
    return answer if stripped is None else stripped


# ---------------------------------------------------------------------- PRM800K's rules
def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_int(value: float) -> bool:
    try:
        return abs(value - round(value)) <= 1e-7
    except (OverflowError, ValueError):
        return False


def _strip_commas(text: str) -> str:
    pattern = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
    while (after := pattern.sub(r"\1\3\4", text)) != text:
        text = after
    return text


def _str_is_int(text: str) -> bool:
    try:
        return _is_int(float(_strip_commas(text)))
    except ValueError:
        return False


def _latex_to_text(expr: str) -> str:
    try:
        latex2text = importlib.import_module("pylatexenc.latex2text")
    except ImportError:
        raise _needs("pylatexenc") from None
    expr = expr.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac")
    expr = latex2text.LatexNodes2Text().latex_to_text(expr.replace("\\frac", " \\frac"))
    for old, new in (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"),
                     ("×", "*")):
        expr = expr.replace(old, new)
    return str(expr).strip()


def normalize_prm(expr: str) -> str:
    """PRM800K's ``_normalize``."""
    match = re.search(r"^\\text\{(?P<text>.+?)\}$", expr)
    if match is not None:
        expr = match.group("text")
    for old, new in (("\\%", "%"), ("\\$", "$"), ("$", ""), ("%", ""), (" or ", " , "),
                     (" and ", " , "), ("million", "*10^6"), ("billion", "*10^9"),
                     ("trillion", "*10^12")):
        expr = expr.replace(old, new)
    for unit in _UNITS:
        expr = re.sub(f"{unit}(es)?(s)? *(\\^[0-9]+)?", "", expr)
    expr = re.sub(r"\^ *\\circ", "", expr)
    if expr and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = re.sub(r",\\! *", "", expr)
    if _is_float(expr) and _is_int(float(expr)):
        expr = str(round(float(expr)))
    if "\\" in expr:
        try:
            expr = _latex_to_text(expr)
        except SuiteError:
            raise
        except Exception:
            pass
    expr = re.sub("- *", "-", expr)
    expr = re.sub("([0-9]) +([0-9])", "\\1+\\2", expr)  # a mixed number: 7 3/4 -> 7+3/4
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _str_is_int(expr):
        expr = str(int(float(expr.replace(",", ""))))
    return expr


def _allow_sympy(expr: str) -> bool:
    letters = {c for c in expr.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    if len(letters) > 2 or "^{" in expr or "^(" in expr:
        return False
    return re.search(r"\^[0-9]+\^", expr) is None and re.search(r"\^[0-9][0-9]+", expr) is None


def _equal_under_sympy(truth: str, given: str) -> bool:
    expr = f"({truth})-({given})"
    if not _allow_sympy(expr):
        return False
    try:
        sympy = importlib.import_module("sympy")
        sympy_parser = importlib.import_module("sympy.parsing.sympy_parser")
    except ImportError:
        raise _needs("sympy") from None
    try:
        parsed: Any = sympy_parser.parse_expr(
            expr.replace("^", "**"), transformations=(
                *sympy_parser.standard_transformations,
                sympy_parser.implicit_multiplication_application))
        return bool(sympy.simplify(parsed) == 0)
    except Exception:
        return False


def _split_tuple(expr: str) -> list[str]:
    expr = _strip_commas(expr)
    if not expr:
        return []
    if (len(expr) > 2 and expr[0] in _TUPLE and expr[-1] in _TUPLE
            and not any(c in expr[1:-1] for c in _TUPLE)):
        return [e.strip() for e in expr[1:-1].split(",")]
    return [expr]


def _is_frac(expr: str) -> bool:
    return re.search(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$", expr) is not None


def grade_answer(given: str | None, truth: str) -> bool:
    """PRM800K's ``grade_answer(given_answer, ground_truth)`` (see the module docstring)."""
    if given is None:
        return False
    if normalize_mathd(truth) == normalize_mathd(given):
        return True
    truth_n, given_n = normalize_prm(truth), normalize_prm(given)
    if truth_n == given_n:
        return True
    if not given_n:
        return False
    truth_parts, given_parts = _split_tuple(truth_n), _split_tuple(given_n)
    if len(truth_parts) > 1 and (truth_n[0] != given_n[0] or truth_n[-1] != given_n[-1]):
        return False
    if len(truth_parts) != len(given_parts):
        return False
    for t, g in zip(truth_parts, given_parts, strict=True):
        if _is_frac(t) and _is_frac(g):
            correct = t == g
        elif _str_is_int(t) != _str_is_int(g):
            correct = False
        else:
            correct = _equal_under_sympy(t, g)
        if not correct:
            return False
    return True
