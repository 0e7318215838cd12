"""Canonical JSON and the input hash, byte for byte as the TypeScript SDK computes them.

A step planned from Python and resumed from TypeScript (or the reverse) must hash its input the
same, or the ledger would see a changed input where there is none (docs/contract.md §4: no
unchanged retry after correct_input). The TypeScript side is ``canonicalJson`` (object keys
sorted, no whitespace) over ``JSON.stringify``; what that means for Python values:

- keys sort by UTF-16 code unit, as JavaScript's ``sort()`` does, not by code point;
- strings are escaped as ``JSON.stringify`` escapes them: ``"``, ``\\``, ``\\b \\f \\n \\r \\t``,
  other control characters as ``\\u00xx``, lone surrogates as ``\\udxxx``; everything else raw;
- numbers are JavaScript doubles written as ``Number.prototype.toString`` writes them: ``1.0``
  is ``1``, ``-0`` is ``0``, ``1e21`` is ``1e+21``, NaN and infinities are ``null``; an ``int``
  beyond 2**53 is the double a JavaScript runtime would have parsed it to;
- ``None`` is ``null``; tuples are arrays; any other type, and a key that is not a ``str``, is
  refused with ``TypeError`` rather than guessed at.

The shared vectors in ``test/vectors/canonical-input-hash.json`` are checked by both test suites.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

__all__ = ["canonical_json", "input_hash"]

_MAX_EXACT_INT = 2**53
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _utf16(text: str) -> str:
    """Surrogate pairs written as two code points become the one character JavaScript sees."""
    if not any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _string(text: str) -> str:
    out = ['"']
    for char in _utf16(text):
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _sort_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare as the code units do.
    return _utf16(key).encode("utf-16-be", "surrogatepass")


def _js_number(value: float) -> str:
    """ECMAScript Number::toString(10) from the shortest round-trip digits Python's repr gives."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # n: where the decimal point sits relative to the digits (value = 0.digits * 10**n).
    n = len(whole) + (int(exponent) if exponent else 0) - (len(whole + fraction) - len((whole + fraction).lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    exp = n - 1
    exp_text = f"e+{exp}" if exp >= 0 else f"e-{-exp}"
    if k == 1:
        return sign + digits + exp_text
    return sign + digits[0] + "." + digits[1:] + exp_text


def _number(value: int | float) -> str:
    if isinstance(value, int):
        if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
            return str(value)
        try:
            return _js_number(float(value))
        except OverflowError:
            return "null"  # JavaScript parses it to Infinity, which JSON.stringify writes as null
    return _js_number(value)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON-shaped value (see the module's notes)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"canonical JSON needs string keys, got {type(key).__name__}")
        members = [f"{_string(key)}:{canonical_json(value[key])}" for key in sorted(value, key=_sort_key)]
        return "{" + ",".join(members) + "}"
    raise TypeError(f"canonical JSON cannot represent {type(value).__name__}")


def input_hash(value: Any) -> str:
    """Hex SHA-256 of the canonical JSON's UTF-8 bytes: the SDK's input hash (docs/contract.md §3)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
