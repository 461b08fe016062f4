"""Reading TOML the suite's way: text that is not UTF-8, not TOML, or holds an integer
too long for Python to read or print fails as one ``ConfigError`` naming the file and
the line or key, never as a traceback.

Every TOML the suite reads (config layers, ``--set`` values, run rules, model cards)
goes through ``parse_toml``; ``decode_utf8`` words a file that is not UTF-8.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

from suite.errors import ConfigError

#: Python reads and prints at most this many decimal digits of an integer (its default
#: ``sys.get_int_max_str_digits()``); ``int()`` and ``str()`` of a longer one raise
#: ``ValueError``. No setting needs a tenth of that, so a longer integer is refused
#: whatever the interpreter's limit, where it is read, before any message prints it.
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10 ** MAX_INT_DIGITS
_DIGIT_RUN = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")
INT_HINT = "check the value's digits: no setting takes an integer that long"


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as text, or one ``ConfigError`` naming ``source`` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                          hint="TOML files are UTF-8; re-save the file as UTF-8") from None


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, every failure one ``ConfigError`` naming ``source``."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except ValueError:
        # tomllib lets int()'s digit limit through unwrapped, with no position: find
        # the line ourselves (underscores group digits in TOML, so drop them first).
        raise ConfigError(f"{source}{_long_int_line(text)}: an integer of more than "
                          f"{MAX_INT_DIGITS:,} digits", hint=INT_HINT) from None
    check_int_sizes(table, source)
    return table


def check_int_sizes(table: Mapping[str, Any], source: str, prefix: str = "") -> None:
    """Refuse an integer of more than ``MAX_INT_DIGITS`` digits anywhere in ``table``.

    Hexadecimal, octal and binary integers have no digit limit in ``int()``, so
    ``0x`` and 4,000 ``f``s parse; printing one (in any message) would then raise.
    """
    for key, value in table.items():
        check_value(value, source, f"{prefix}{key}")


def check_value(value: Any, source: str, key: str) -> None:
    """``check_int_sizes`` for one value, ``key`` naming it (for a ``--set`` value)."""
    if isinstance(value, Mapping):
        check_int_sizes(value, source, key + ".")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_value(item, source, f"{key}[{index}]")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_LIMIT:
        raise ConfigError(f"{source}: {key} is an integer of more than {MAX_INT_DIGITS:,} "
                          f"digits ({value.bit_length():,} bits)", hint=INT_HINT)


def _long_int_line(text: str) -> str:
    for number, line in enumerate(text.splitlines(), start=1):
        if _DIGIT_RUN.search(line.replace("_", "")):
            key = line.partition("=")[0].strip() if "=" in line else ""
            return f":{number}" + (f" ({key[:60]})" if key else "")
    return ""
