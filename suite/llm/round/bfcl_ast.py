"""BFCL's AST match, as the round scores a function call (qwen3.6-27b).

The rules are those of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (bfcl-eval
2026.3.23, the checker mlcommons/endpoints' ``bfcl_v4_scorer.py`` calls with the model name
``gpt-4o-2024-11-20-FC``), restated here:

* **which check**: a subset named ``*parallel*`` matches every expected call to a distinct
  returned call in any order (same count); ``*multiple*`` wants exactly one call, checked
  against the expected one; any other wants exactly one call, checked against the first
  function and answer;
* **one call**: the function's name (a ``.`` in the described name becomes ``_``, as
  the model name's ``underscore_to_dot`` says); every required parameter present; every
  returned parameter described and among the answer's; each value of its described type
  (Python: ``integer``, ``float`` (an integer is taken as a float), ``string``,
  ``boolean``, ``array``/``tuple`` (one level of item types), ``dict``, ``any``; Java
  and JavaScript values are strings converted first, ``bfcl_types``); then the value
  among the allowed ones: strings compared without spaces and ``,./-_*^``, case-folded,
  ``'`` as ``"``; lists item by item so; dicts key by key; lists of dicts in order; every
  answer parameter not returned must allow ``""`` (optional);
* a value of the answer's own type where the description says another (BFCL writes a
  variable's name as a string) is taken as a variable: only its type is checked where
  the answer's type is not the described one, then compared as it is.

``check`` returns (valid, error type); the error types are the reference's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from suite.errors import DatasetError

PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float,
                                 "boolean": bool, "array": list, "tuple": list, "dict": dict,
                                 "any": str}
_NESTED = ("array", "tuple")
_STRIP = re.compile(r"[ \,\.\/\-\_\*\^]")

Result = tuple[bool, str]
OK: Result = (True, "")


def standardize(text: str) -> str:
    return _STRIP.sub("", text).lower().replace("'", '"')


def _answer_type(allowed: Sequence[Any]) -> type | None:
    """The type of the first allowed value that is not the optional marker ""."""
    return next((type(a) for a in allowed if a != ""), None)


def _type_check(value: Any, allowed: Any, expected: type,
                nested: type | None) -> tuple[bool, bool, str]:
    """(valid, is a variable, error type) of ``value`` against the described type."""
    answer_type = _answer_type(allowed)
    variable = answer_type is not None and answer_type is not expected
    error = "type_error:simple"
    if type(value) is expected:
        if nested is None:
            return True, variable, ""
        items: Any = value  # a list: its type is the described one
        for answer in allowed:
            if isinstance(answer, list) and not all(
                    _type_check(item, answer, nested, None)[0] for item in items):
                continue
            return True, variable, ""
        error = "type_error:nested"
    if answer_type is not None and type(value) is answer_type:
        return True, True, ""
    return False, False, error


def _strings(allowed: Sequence[Any]) -> list[Any]:
    return [standardize(a) if type(a) is str else a for a in allowed]


def _list_ok(value: list[Any], allowed: Sequence[Any]) -> bool:
    given = [standardize(v) if type(v) is str else v for v in value]
    return given in [_strings(answer) for answer in allowed]


def _dict_ok(value: dict[str, Any], allowed: Sequence[Any]) -> Result:
    error = "dict_checker:unclear"
    for answer in allowed:
        if answer == "":
            continue
        error = ""
        for key, item in value.items():
            if key not in answer:
                error = "value_error:dict_key"
                break
            given = standardize(item) if type(item) is str else item
            if given not in _strings(answer[key]):
                error = "value_error:dict_value"
                break
        for key, options in answer.items():
            if key not in value and "" not in options:
                error = "value_error:dict_key"
                break
        if not error:
            return OK
    return False, error


def _list_dict_ok(value: list[Any], allowed: Sequence[Any]) -> Result:
    result: Result = (False, "list_dict_checker:unclear")
    for answer in allowed:
        if len(value) != len(answer):
            result = (False, "value_error:list_dict_count")
            continue
        for index, item in enumerate(value):
            result = _dict_ok(item, [answer[index]])
            if not result[0]:
                break
        else:
            return OK
    return result


def _convert(language: str, value: Any, described: str, details: dict[str, Any]
             ) -> tuple[Any, type, type | None] | Result:
    """Java/JavaScript: the string value converted (``bfcl_types``); Python: as it is."""
    from suite.llm.round import bfcl_types

    table = bfcl_types.JAVA_TYPES if language == "java" else bfcl_types.JS_TYPES
    if described not in table:
        raise DatasetError(f"a {language} parameter of type '{described}', which the "
                           "reference's checker does not know")
    if type(value) is not str:
        return False, f"type_error:{'java' if language == 'java' else 'js'}"
    nested = None
    if described in bfcl_types.NESTED_TYPES:
        item = details["items"]["type"]
        nested = table[item]
        value = bfcl_types.convert(language, value, described, item)
    else:
        value = bfcl_types.convert(language, value, described)
    return value, table[described], nested


def _one(description: dict[str, Any], call: dict[str, Any], answer: dict[str, Any],
         language: str) -> Result:
    """One returned call against one expected call (``simple_function_checker``)."""
    allowed_by_param: dict[str, list[Any]] = next(iter(answer.values()))
    name = description["name"].replace(".", "_")
    params = description["parameters"]["properties"]
    if name not in call:
        return False, "simple_function_checker:wrong_func_name"
    given: dict[str, Any] = call[name]
    for param in description["parameters"]["required"]:
        if param not in given:
            return False, "simple_function_checker:missing_required"
    for param, value in given.items():
        if param not in params or param not in allowed_by_param:
            return False, "simple_function_checker:unexpected_param"
        described = params[param]["type"]
        allowed = allowed_by_param[param]
        if language == "python":
            if described not in PYTHON_TYPES:
                raise DatasetError(f"a parameter of type '{described}', which the "
                                   "reference's checker does not know")
            expected, nested = PYTHON_TYPES[described], None
            if described in _NESTED:
                nested = PYTHON_TYPES[params[param]["items"]["type"]]
            if described == "float" and type(value) is int:
                value = float(value)
        else:
            converted = _convert(language, value, described, params[param])
            if len(converted) == 2:
                return converted[0], str(converted[1])
            value, expected, nested = converted
        ok, variable, error = _type_check(value, allowed, expected, nested)
        if not ok:
            return False, error
        if not variable:
            if expected is dict:
                verdict = _dict_ok(value, allowed)
            elif expected is list and nested is dict:
                verdict = _list_dict_ok(value, allowed)
            elif expected is str:
                verdict = OK if standardize(value) in [standardize(a) for a in allowed
                                                      if type(a) is str] \
                    else (False, "value_error:string")
            elif expected is list:
                verdict = OK if _list_ok(list(value), allowed) \
                    else (False, "value_error:list/tuple")
            else:
                verdict = None
            if verdict is not None:
                if not verdict[0]:
                    return verdict
                continue
        if value not in allowed:
            return False, "value_error:others"
    for param, allowed in allowed_by_param.items():
        if param not in given and "" not in allowed:
            return False, "simple_function_checker:missing_optional"
    return OK


def _describe(functions: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    found = next((f for f in functions if f.get("name") == name), None)
    if found is None:
        raise DatasetError(f"the ground truth names function '{name}', which the sample's "
                           "func_description does not describe")
    return found


def check(functions: Sequence[dict[str, Any]], calls: Sequence[dict[str, Any]],
          possible: Sequence[dict[str, Any]], subset: str, language: str = "python"
          ) -> Result:
    """Whether ``calls`` (``[{name: arguments}]``) match ``possible`` (BFCL's answers)."""
    if not functions:
        raise DatasetError(f"a {subset} sample has no func_description to check its calls "
                           "against", hint="give the official BFCL parquet")
    if "parallel" in subset:
        if len(calls) != len(possible):
            return False, "parallel_function_checker_no_order:wrong_count"
        matched: set[int] = set()
        for answer in possible:
            description = _describe(functions, next(iter(answer)))
            found = next((i for i, call in enumerate(calls) if i not in matched
                          and _one(description, call, answer, language)[0]), None)
            if found is None:
                return False, "parallel_function_checker_no_order:cannot_find_match"
            matched.add(found)
        return OK
    if len(calls) != len(possible) if "multiple" in subset else len(calls) != 1:
        return False, ("multiple_function_checker:wrong_count" if "multiple" in subset
                       else "simple_function_checker:wrong_count")
    if "multiple" in subset:
        return _one(_describe(functions, next(iter(possible[0]))), calls[0], possible[0],
                    language)
    return _one(functions[0], calls[0], possible[0], language)
