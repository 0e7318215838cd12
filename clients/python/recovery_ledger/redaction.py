"""Secret redaction (docs/contract.md §2), the same rules as the ledger's ``redaction.ts``.

Whatever a tool hands back is untrusted and may carry credentials. Three layers, as in TypeScript:
an optional detector passed in by the caller, the shapes below (same patterns, same order, same
kinds), and key names (a value under ``password``, ``client_secret``, ``api_key``, … is a secret
whatever it looks like, as a JSON key and in ``key=value`` / ``key: value`` text).

The patterns are the TypeScript ones translated with care: JavaScript's ``\\b`` and ``\\d`` are
ASCII, and so is its case folding without the ``u`` flag (``re.ASCII`` here, which also keeps
``IGNORECASE`` to ASCII letters); its ``\\s`` is Unicode whitespace (spelled out below, since
``re.ASCII`` narrows Python's); its ``$`` without the m flag is the very end (``\\Z`` here); and it
counts UTF-16 code units where Python counts code points, which matters in one place (the
three-character look-ahead of the assignment pass, see ``_ASSIGNMENT``). ``test/vectors/redaction.json``
holds what the TypeScript implementation makes of each text; both suites check it.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Sequence

__all__ = [
    "DetectedSecret",
    "Redaction",
    "SecretDetector",
    "SecretKind",
    "contains_secret",
    "is_card_number",
    "is_secret_key_name",
    "passes_luhn",
    "redact_deep",
    "redact_text",
]

SecretKind = Literal[
    "private_key",
    "jwt",
    "bearer_token",
    "basic_auth",
    "api_key",
    "aws_access_key",
    "github_token",
    "slack_token",
    "slack_webhook",
    "google_api_key",
    "sendgrid_key",
    "basic_auth_url",
    "named_secret",
    "card_number",
]
"""The kinds the shapes and key names report; a detector's kinds are ``detected_<rule>`` strings."""


@dataclass(frozen=True)
class Redaction:
    """What was redacted where: the path and the kind, never the secret."""

    path: str
    kind: str


@dataclass(frozen=True)
class DetectedSecret:
    """A secret a detector found: the half-open range [start, end) of the text (code points) and its kind."""

    start: int
    end: int
    kind: str


SecretDetector = Callable[[str], Sequence[DetectedSecret]]

# JavaScript's \s: ECMAScript WhiteSpace and LineTerminator.
_WS = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_FLAGS = re.ASCII
_I = re.ASCII | re.IGNORECASE

# Key names whose value is a secret whatever it looks like (compared lower-case, without separators).
_SECRET_NAME_ANYWHERE = re.compile(
    r"(password|passwd|passphrase|secret|apikey|privatekey|accesskey|authorization|credential|cookie)", _FLAGS
)
_SECRET_NAME_SUFFIX = re.compile(r"(token|pwd|auth|sessionid|cvv|cvc)\Z", _FLAGS)
_NOT_ALPHANUMERIC = re.compile(r"[^a-z0-9]", _FLAGS)


def is_secret_key_name(key: str) -> bool:
    # str.lower() is Unicode's full lower-casing, as String.prototype.toLowerCase (the Kelvin sign is a k in both).
    normalised = _NOT_ALPHANUMERIC.sub("", key.lower())
    return bool(_SECRET_NAME_ANYWHERE.search(normalised) or _SECRET_NAME_SUFFIX.search(normalised))


# What may follow `=` / `:` as a value: TypeScript's [^\s"',;&)}\]].
_VALUE_CHAR = rf"[^{_WS}\"',;&)}}\]]"
_ASTRAL = "[\\U00010000-\\U0010ffff]"
# The same names inside text: `DB_PASSWORD=…`, `"client_secret": "…"`, `aws_secret_access_key = …`.
# TypeScript asks for three value characters ahead, counted in UTF-16 code units: a character beyond
# the BMP is two of them, so two value characters of which one is astral are three units too.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])([\"']?)([A-Za-z0-9_.-]{1,64})\1"
    rf"[{_WS}]*(?:=>|=|:)[{_WS}]*[\"']?(?!\[REDACTED)"
    rf"(?={_VALUE_CHAR}{{3}}|{_VALUE_CHAR}{_ASTRAL}|{_ASTRAL}{_VALUE_CHAR})",
    _FLAGS,
)
_ASSIGNED_VALUE = re.compile(rf"{_VALUE_CHAR}+", _FLAGS)


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _redact_assignments(text: str, kinds: list[str]) -> str:
    """Redacts the value of every ``name=value`` whose name is a secret's; the name stays."""
    out: list[str] = []
    start = 0
    for match in _ASSIGNMENT.finditer(text):
        value_start = match.end()
        if value_start < start or not is_secret_key_name(match.group(2)):
            continue
        value = _ASSIGNED_VALUE.match(text, value_start)
        if value is None:
            continue
        kinds.append("named_secret")
        out.append(text[start:value_start])
        out.append(_marker("named_secret"))
        start = value.end()
    return text if start == 0 else "".join(out) + text[start:]


_BASE64 = re.compile(r"[A-Za-z0-9+/]*", _FLAGS)
_BASIC_PREFIX = re.compile(rf"^basic[{_WS}]+", _I)


def _atob(encoded: str) -> Optional[bytes]:
    """The browser's ``atob`` (forgiving-base64 decode): None where it would throw."""
    data = re.sub(r"[\t\n\f\r ]", "", encoded)
    if len(data) % 4 == 0:
        data = data[:-2] if data.endswith("==") else data[:-1] if data.endswith("=") else data
    if len(data) % 4 == 1 or not _BASE64.fullmatch(data):
        return None
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return None


def _is_basic_credential(match: str) -> bool:
    """``Basic <base64 of user:password>`` (RFC 7617); "basic authentication" is not one."""
    decoded = _atob(_BASIC_PREFIX.sub("", match, count=1))
    return decoded is not None and b":" in decoded


def passes_luhn(digits: str) -> bool:
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def is_card_number(digits: str) -> bool:
    """Luhn, and the length and leading digits of a card network (Visa, Mastercard, Amex, Discover,
    JCB, Diners, UnionPay, Maestro): a Luhn-valid millisecond timestamp is not a card."""
    if not passes_luhn(digits):
        return False
    length = len(digits)

    def prefix(size: int) -> int:
        return int(digits[:size])

    if digits[0] == "4":
        return length in (13, 16, 19)
    if 51 <= prefix(2) <= 55 or 2221 <= prefix(4) <= 2720:
        return length == 16
    if prefix(2) in (34, 37):
        return length == 15
    if prefix(4) == 6011 or prefix(2) == 65 or 644 <= prefix(3) <= 649:
        return length >= 16
    if 3528 <= prefix(4) <= 3589:
        return length >= 16
    if prefix(2) in (36, 38) or 300 <= prefix(3) <= 305:
        return length >= 14
    if prefix(2) == 62:
        return length >= 16
    if digits[:2] in ("50", "56", "57", "58", "63", "67"):
        return length >= 12
    return False


_NON_DIGIT = re.compile(r"\D", _FLAGS)

# Order matters: the widest shapes first, so a JWT inside "Bearer eyJ…" is reported as a bearer
# token, and a credential after `Authorization:` is redacted by its scheme before its key name.
_PATTERNS: tuple[tuple[SecretKind, re.Pattern[str], Optional[Callable[[str], bool]]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            _FLAGS,
        ),
        None,
    ),
    ("bearer_token", re.compile(rf"\b(?:bearer|token)[{_WS}]+(?!\[REDACTED)[A-Za-z0-9\-._~+/]{{8,}}=*", _I), None),
    ("basic_auth", re.compile(rf"\bbasic[{_WS}]+[A-Za-z0-9+/]{{6,}}={{0,2}}", _I), _is_basic_credential),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", _FLAGS), None),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+", _FLAGS), None),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}", _FLAGS), None),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", _FLAGS), None),
    ("api_key", re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}", _FLAGS), None),
    ("api_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}", _FLAGS), None),
    # Tailscale keys (the service's secretlint release has no rule for them).
    ("api_key", re.compile(r"\btskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}", _FLAGS), None),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", _FLAGS), None),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b", _FLAGS), None),
    ("slack_token", re.compile(r"\bx(?:ox[abposre]|app)-[A-Za-z0-9-]{10,}", _FLAGS), None),
    ("basic_auth_url", re.compile(rf"\b[a-z][a-z0-9+.-]*://[^{_WS}/:@]+:[^{_WS}/@]+@", _I), None),
    (
        "card_number",
        re.compile(r"\b\d(?:[ -]?\d){12,18}\b", _FLAGS),
        lambda match: is_card_number(_NON_DIGIT.sub("", match)),
    ),
)


def _apply_detected(text: str, found: Sequence[DetectedSecret], kinds: list[str]) -> str:
    """Replaces the detector's ranges (merged where they overlap), right to left so offsets hold."""
    if not found:
        return text
    ranges = sorted((item for item in found if item.end > item.start), key=lambda item: item.start)
    merged: list[list[Any]] = []
    for item in ranges:
        if merged and item.start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], item.end)
        else:
            merged.append([item.start, item.end, item.kind])
    out = text
    for start, end, kind in reversed(merged):
        kinds.append(kind)
        out = f"{out[:start]}{_marker(kind)}{out[end:]}"
    return out


def redact_text(text: str, detect: Optional[SecretDetector] = None) -> tuple[str, list[str]]:
    """The text with each secret replaced by ``[REDACTED:kind]``, and the kinds in the order found."""
    kinds: list[str] = []
    redacted = _apply_detected(text, detect(text), kinds) if detect is not None else text
    last = len(_PATTERNS) - 1
    for index, (kind, pattern, accept) in enumerate(_PATTERNS):
        # Names after the shapes (a credential after `Authorization:` is redacted by its scheme), cards last.
        if index == last:
            redacted = _redact_assignments(redacted, kinds)

        def replace(match: re.Match[str], kind: str = kind, accept: Optional[Callable[[str], bool]] = accept) -> str:
            if accept is not None and not accept(match.group(0)):
                return match.group(0)
            kinds.append(kind)
            return _marker(kind)

        redacted = pattern.sub(replace, redacted)
    return redacted, kinds


def contains_secret(text: str, detect: Optional[SecretDetector] = None) -> bool:
    """Whether a text holds anything any layer would redact."""
    return len(redact_text(text, detect)[1]) > 0


_MAX_SAFE_INTEGER = 2**53 - 1
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*", _FLAGS)


def _javascript_key_order(node: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """``Object.entries`` order: keys that are array indices first, ascending, then the rest as inserted."""
    items = list(node.items())
    indices = [item for item in items if isinstance(item[0], str) and _ARRAY_INDEX.fullmatch(item[0]) and int(item[0]) < 2**32 - 1]
    if not indices:
        return items
    others = [item for item in items if not (isinstance(item[0], str) and _ARRAY_INDEX.fullmatch(item[0]) and int(item[0]) < 2**32 - 1)]
    return sorted(indices, key=lambda item: int(item[0])) + others


def _card_digits(node: Any) -> Optional[str]:
    """The digits of a number JavaScript would see as a positive safe integer (a bool is not a number)."""
    if isinstance(node, bool):
        return None
    if isinstance(node, int):
        return str(node) if 0 < node <= _MAX_SAFE_INTEGER else None
    if isinstance(node, float) and node.is_integer() and 0 < node <= _MAX_SAFE_INTEGER:
        return str(int(node))
    return None


def redact_deep(value: Any, path: str = "", detect: Optional[SecretDetector] = None) -> tuple[Any, list[Redaction]]:
    """Redacts every string leaf, object key and card-like number of a JSON value; returns a new value.
    A value under a secret key name is replaced whole, whatever its type (``None``, booleans and ``""`` stay)."""
    redactions: list[Redaction] = []

    def walk(node: Any, at: str) -> Any:
        if isinstance(node, str):
            text, kinds = redact_text(node, detect)
            redactions.extend(Redaction(at or "$", kind) for kind in kinds)
            return text
        digits = _card_digits(node)
        if digits is not None and is_card_number(digits):
            # A card sent as a JSON number is a card all the same.
            redactions.append(Redaction(at or "$", "card_number"))
            return _marker("card_number")
        if isinstance(node, (list, tuple)):
            return [walk(item, f"{at}[{index}]") for index, item in enumerate(node)]
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, item in _javascript_key_order(node):
                safe_key, kinds = redact_text(str(key), detect)
                redactions.extend(Redaction(f"{at}.<key>", kind) for kind in kinds)
                item_path = f"{at}.{safe_key}" if at else safe_key
                if is_secret_key_name(str(key)) and item is not None and not isinstance(item, bool) and item != "":
                    redactions.append(Redaction(item_path, "named_secret"))
                    out[safe_key] = _marker("named_secret")
                    continue
                out[safe_key] = walk(item, item_path)
            return out
        return node

    return walk(value, path), redactions
