"""Java and JavaScript argument values, converted as BFCL's AST checker converts them.

BFCL's ``simple_java`` and ``simple_javascript`` samples take every argument as a string
of source code (``"new ArrayList<>(Arrays.asList(1, 2))"``, ``"[1, 2]"``, ``"42L"``); the
checker converts it to a Python value by the parameter's described type before it
compares (bfcl_eval ``eval_checker/ast_eval/type_convertor/java_type_converter.py`` and
``js_type_converter.py``, bfcl-eval 2026.3.23). Restated here:

* a string that does not have its type's form stays the string (and then fails the type
  check, or matches as a variable);
* Java: ``byte``/``short``/``integer`` ``-?\\d+``; ``float`` with an ``f``; ``double``
  without; ``long`` with an ``L``; ``boolean`` ``true``/``false``; ``char``, ``String``,
  ``any`` as they are; ``Array`` ``new T[] {a, b}``; ``ArrayList`` ``new ArrayList<>(
  Arrays.asList(...))``, ``new ArrayList<>() {{ add(x); }}`` or empty; ``HashMap`` ``new
  HashMap<>() {{ put("k", v); }}`` or empty; elements by their item type, else read as
  Java literals; ``Set``, ``Hashtable``, ``Queue`` and ``Stack`` are not implemented by
  the reference (an error here, as there);
* JavaScript: ``String`` quoted or not; ``integer``; ``float`` (no exponent); ``Bigint``
  with an ``n``; ``Boolean``; ``array`` ``[...]``, ``new Array(...)`` or a 2-D array;
  ``dict`` ``{k: v, ...}`` (nested arrays and objects), ``any`` as it is.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from suite.errors import DatasetError

JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set,
    "HashMap": dict, "Hashtable": dict, "Queue": list, "Stack": list, "String": str,
    "any": str}
JS_TYPES: dict[str, type] = {"String": str, "integer": int, "float": float, "Bigint": int,
                             "Boolean": bool, "dict": dict, "array": list, "any": str}
#: The described types whose items have a type of their own.
NESTED_TYPES = ("Array", "ArrayList", "array")

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")


def convert(language: str, value: str, described: str, item: str | None = None) -> Any:
    """``value`` (source text) as the reference's converter for ``language`` reads it."""
    return java(value, described, item) if language == "java" else js(value, described, item)


def java_literal(text: str) -> Any:
    """A Java literal without a known type (``parse_java_value``)."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(text.rstrip("fF"))
    with contextlib.suppress(ValueError):
        return int(text)
    with contextlib.suppress(ValueError):
        return float(text)
    return text


def _java_item(text: str, item: str | None) -> Any:
    if item in ("char", "String"):
        return text[1:-1]  # the quotes removed
    return java(text, item) if item else java_literal(text)


def java(value: str, described: str, item: str | None = None) -> Any:
    if described in ("byte", "short", "integer"):
        return int(value) if _INT.match(value) else value
    if described == "float":
        return float(value.rstrip("fF")) if _JAVA_FLOAT.match(value) else value
    if described == "double":
        return float(value) if _JAVA_DOUBLE.match(value) else value
    if described == "long":
        return int(value[:-1]) if _JAVA_LONG.match(value) else value
    if described == "boolean":
        return value == "true" if value in ("true", "false") else value
    if described in ("char", "String", "any"):
        return value  # char: the reference's quote pattern never matches, so as it is
    if described == "ArrayList":
        return _java_arraylist(value, item)
    if described == "Array":
        found = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", value)
        if not found:
            return value
        return [java(x.strip(), item) if item else java_literal(x.strip())
                for x in found.group(1).split(",") if x.strip()]
    if described == "HashMap":
        return _java_hashmap(value)
    raise DatasetError(f"a Java parameter of type '{described}', whose conversion the "
                       "reference's checker does not implement")


def _java_arraylist(value: str, item: str | None) -> Any:
    listed = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", value)
    if listed:
        return [_java_item(x.strip(), item) for x in listed.group(1).split(",")]
    added = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", value, re.DOTALL)
    if added:
        return [_java_item(x.strip(), item) for x in re.findall(r"add\((.+?)\)",
                                                               added.group(1))]
    return [] if re.search(r"new\s+ArrayList<\w*>\(\)", value) else value


def _java_hashmap(value: str) -> Any:
    found = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", value,
                      re.DOTALL)
    if found:
        return {key: java_literal(item.strip())
                for key, item in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", found.group(1))}
    return {} if re.search(r"new\s+HashMap<.*?>\s*\(\)", value) else value


def js_literal(text: str) -> Any:
    """A JavaScript literal without a known type (``parse_js_value``)."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 1 and ((text.startswith('"') and text.endswith('"'))
                           or (text.startswith("'") and text.endswith("'"))):
        return text[1:-1]
    with contextlib.suppress(ValueError):
        return int(text)
    with contextlib.suppress(ValueError):
        return float(text)
    return text


def js(value: str, described: str, item: str | None = None) -> Any:
    if described == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or \
            (value.startswith("'") and value.endswith("'"))
        return value[1:-1] if quoted else value
    if described == "integer":
        return int(value) if _INT.match(value) else value
    if described == "float":
        return float(value) if re.match(r"^-?\d+(\.\d+)?$", value) else value
    if described == "Bigint":
        return int(value[:-1]) if re.match(r"^-?\d+n$", value) else value
    if described == "Boolean":
        return value == "true" if value in ("true", "false") else value
    if described == "array":
        try:
            return _js_array(value.strip(), item)
        except Exception:  # the reference returns the text on any failure
            return value.strip()
    if described == "dict":
        return _js_dict(value.strip())
    if described == "any":
        return value
    raise DatasetError(f"a JavaScript parameter of type '{described}', which the "
                       "reference's checker does not know")


def _js_array(code: str, item: str | None) -> Any:
    two_d = re.match(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*"
                     r"(,\s*\[.*?\]\s*)*\)", code)
    if two_d:
        rows = []
        for index, inner in enumerate(re.findall(r"\[(.*?)\]", two_d.group(0))):
            inner = inner.strip()
            if index == 0 and inner.startswith("["):
                inner = inner[1:]
            rows.append([js_literal(e.strip()) for e in inner.split(",")])
        return rows
    found = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
    if not found:
        return code
    text = found.group(1) if found.group(1) is not None else found.group(2) or ""
    elements = text.strip().split(",") if text.strip() else []
    if item:
        return [js(e.strip(), item) for e in elements]
    return [js_literal(e.strip()) for e in elements]


def _js_dict(code: str) -> Any:
    if code == "{}":
        return {}
    found = re.match(r"\{(.*?)\}", code)
    if not found:
        return code
    try:
        result: dict[str, Any] = {}
        for key, item in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", found.group(1)):
            key, item = key.strip().strip("'\""), item.strip()
            if item.startswith("[") and item.endswith("]"):
                result[key] = js(item, "array")
            elif item.startswith("{") and item.endswith("}"):
                result[key] = _js_dict(item)
            else:
                result[key] = js_literal(item.strip("'\""))
        return result
    except Exception:  # the reference returns the text on any failure
        return code
