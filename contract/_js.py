"""JavaScript string and JSON semantics, for byte compatibility with the upstream TypeScript.

Python and JavaScript disagree on what whitespace is, on how long a string is (code points
against UTF-16 code units) and on how numbers and strings are written as JSON. The
question contract was defined by running JavaScript, so everything here follows JavaScript.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

# ECMAScript WhiteSpace + LineTerminator: what `\s` and String.prototype.trim() match.
# Python's str.strip() and `\s` also match U+001C-U+001F and U+0085 and miss U+FEFF.
JS_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_CLASS = r"\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

_LINE_BREAKS_RE = re.compile(r"[\r\n\t]")
_CONTROLS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WS_RUN_RE = re.compile(f"[{_WS_CLASS}]{{2,}}")

# A surrogate pair held as two code points is one character to JavaScript, so it is
# matched first and written out whole; only unpaired halves are escaped.
_JSON_ESCAPE_RE = re.compile(r'([\ud800-\udbff][\udc00-\udfff])|[\x00-\x1f"\\\ud800-\udfff]')
_JSON_SHORT_ESCAPES: Final = {
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\x0c": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}
_MAX_SAFE_INTEGER: Final = 2**53
_MAX_ARRAY_INDEX: Final = 2**32 - 2


class _Undefined:
    """JavaScript's ``undefined``: what reading a missing property gives. Use the one ``UNDEFINED``."""

    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()


def js_trim(text: str) -> str:
    """``String.prototype.trim()``: strip JavaScript whitespace from both ends."""
    return text.strip(JS_WHITESPACE)


def is_blank(text: str) -> bool:
    """True when ``text`` is empty or only JavaScript whitespace."""
    return not js_trim(text)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``length`` counts it."""
    return len(text) + sum(1 for char in text if char > "\uffff")


def cut_utf16(text: str, limit: int) -> str:
    """``text.slice(0, limit)`` in UTF-16 code units.

    A character outside the BMP that straddles the limit leaves its high surrogate
    behind as a lone surrogate, exactly as JavaScript does.
    """
    if len(text) * 2 <= limit or utf16_len(text) <= limit:
        return text
    units = text.encode("utf-16-le", "surrogatepass")[: 2 * limit]
    return units.decode("utf-16-le", "surrogatepass")


def one_line(text: str) -> str:
    """The narration sanitizer: one line, no control characters, whitespace runs collapsed, trimmed."""
    text = _LINE_BREAKS_RE.sub(" ", text)
    text = _CONTROLS_RE.sub("", text)
    text = _WS_RUN_RE.sub(" ", text)
    return js_trim(text)


def is_js_number(value: object) -> bool:
    """``typeof value === "number"``; Python's bool is an int but JavaScript's boolean is not a number."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_js_integer(value: object) -> int | None:
    """``Number.isInteger(value) ? value : undefined``, with ``1.0`` read as ``1``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def js_truthy(value: object) -> bool:
    """JavaScript truthiness: empty containers are truthy, NaN and ``""`` are not."""
    if value is None or value is UNDEFINED:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def js_number(value: float) -> str:
    """``String(number)``: the shortest round-trip digits, in JavaScript's layout."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _MAX_SAFE_INTEGER:
        return str(value)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"  # -0 too
    if number < 0:
        return "-" + js_number(-number)
    # repr() gives the same shortest digits as JavaScript; only the layout differs.
    mantissa, _, exp_text = repr(number).partition("e")
    whole, _, fraction = mantissa.partition(".")
    combined = whole + fraction
    stripped = combined.lstrip("0")
    digits = stripped.rstrip("0")
    # ECMAScript Number::toString: value = 0.<digits> x 10^point.
    point = len(whole) + (int(exp_text) if exp_text else 0) - (len(combined) - len(stripped))
    k = len(digits)
    if k <= point <= 21:
        return digits + "0" * (point - k)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    exponent = point - 1
    sign = "+" if exponent >= 0 else "-"
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(exponent)}"


def js_str(value: object) -> str:
    """``String(value)``, as template literals interpolate it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, list | tuple):
        return ",".join("" if item is None or item is UNDEFINED else js_str(item) for item in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def _escape(match: re.Match[str]) -> str:
    pair = match.group(1)
    if pair is not None:
        return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))
    char = match.group(0)
    return _JSON_SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _json_string(text: str) -> str:
    return '"' + _JSON_ESCAPE_RE.sub(_escape, text) + '"'


def _is_array_index(key: str) -> bool:
    # JavaScript objects list canonical array-index keys first, in ascending order.
    return key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= _MAX_ARRAY_INDEX


def _key(key: object) -> str:
    return key if isinstance(key, str) else js_str(key)


def compact_json(value: Any) -> str:
    """Compact JSON, fast: the C encoder in the common case, :func:`to_json` when a text carries half
    a surrogate pair (a 4000-unit cut can leave one), which UTF-8 cannot hold. For values without
    floats, the one place where the two writers could print differently, the output is the same."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return to_json(value)
    return text


def to_json(value: Any) -> str:
    """Write ``value`` exactly as JavaScript's ``JSON.stringify(value)`` would.

    Compact, keys in insertion order (array-index keys first, as in JavaScript),
    non-ASCII kept, lone surrogates escaped as ``\\udXXX``, numbers in JavaScript's
    layout (``1.0`` is ``1``, ``1e21`` is ``1e+21``), NaN and infinities as ``null``.
    Objects with a ``to_wire()`` method (the contract's models) are written as its result.
    """
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_json_string(value))
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int | float):
        text = js_number(value)
        out.append(text if text not in ("NaN", "Infinity", "-Infinity") else "null")
    elif isinstance(value, Mapping):
        items: dict[str, Any] = {}
        for key, item in value.items():
            if item is not UNDEFINED:  # JSON.stringify leaves undefined members out
                items[_key(key)] = item
        keys = sorted((k for k in items if _is_array_index(k)), key=int)
        keys += [k for k in items if not _is_array_index(k)]
        out.append("{")
        for position, key in enumerate(keys):
            if position:
                out.append(",")
            out.append(_json_string(key))
            out.append(":")
            _write(items[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for position, item in enumerate(value):
            if position:
                out.append(",")
            _write(None if item is UNDEFINED else item, out)
        out.append("]")
    elif callable(getattr(value, "to_wire", None)):
        _write(value.to_wire(), out)
    else:
        raise TypeError(f"to_json cannot write a {type(value).__name__}")
