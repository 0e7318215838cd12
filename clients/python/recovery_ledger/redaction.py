"""Secret redaction (docs/contract.md §2), the same patterns as the ledger's.

Whatever a tool hands back is untrusted and may carry credentials. The patterns are the
TypeScript ones translated with care: JavaScript's ``\\b`` and ``\\d`` are ASCII (``re.ASCII``
here), its ``\\s`` is Unicode whitespace (spelled out below, since ``re.ASCII`` narrows Python's),
and its ``$`` without the m flag is the very end (``\\Z`` here). ``test/vectors/redaction.json``
holds what the TypeScript implementation makes of each text; both suites check it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal

__all__ = ["Redaction", "SecretKind", "passes_luhn", "redact_text", "redact_deep"]

SecretKind = Literal[
    "private_key",
    "jwt",
    "bearer_token",
    "api_key",
    "aws_access_key",
    "github_token",
    "slack_token",
    "basic_auth_url",
    "card_number",
]


@dataclass(frozen=True)
class Redaction:
    """What was redacted where: the path and the kind, never the secret."""

    path: str
    kind: SecretKind


# JavaScript's \s: ECMAScript WhiteSpace and LineTerminator.
_WS = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_FLAGS = re.ASCII
_I = re.ASCII | re.IGNORECASE


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


# Order matters: the widest shapes first, so a JWT inside "Bearer eyJ…" is reported as a bearer token.
_PATTERNS: tuple[tuple[SecretKind, re.Pattern[str], Callable[[str], bool] | None], ...] = (
    (
        "private_key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", _FLAGS),
        None,
    ),
    ("bearer_token", re.compile(rf"\b(?:bearer|token)[{_WS}]+[A-Za-z0-9\-._~+/]{{8,}}=*", _I), None),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", _FLAGS), None),
    ("api_key", re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}\b", _FLAGS), None),
    ("api_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}", _FLAGS), None),
    (
        "api_key",
        re.compile(rf"\b(?:api[_-]?key|apikey|secret|password|passwd)[{_WS}]*[:=][{_WS}]*[\"']?[^{_WS}\"',;]{{6,}}", _I),
        None,
    ),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", _FLAGS), None),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b", _FLAGS), None),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", _FLAGS), None),
    ("basic_auth_url", re.compile(rf"\b[a-z][a-z0-9+.-]*://[^{_WS}/:@]+:[^{_WS}/@]+@", _I), None),
    ("card_number", re.compile(r"\b\d(?:[ -]?\d){12,18}\b", _FLAGS), lambda match: passes_luhn(re.sub(r"\D", "", match, flags=_FLAGS))),
)


def redact_text(text: str) -> tuple[str, list[SecretKind]]:
    """The text with each secret replaced by ``[REDACTED:kind]``, and the kinds in the order found."""
    kinds: list[SecretKind] = []
    redacted = text
    for kind, pattern, accept in _PATTERNS:

        def replace(match: re.Match[str], kind: SecretKind = kind, accept: Callable[[str], bool] | None = accept) -> str:
            if accept is not None and not accept(match.group(0)):
                return match.group(0)
            kinds.append(kind)
            return f"[REDACTED:{kind}]"

        redacted = pattern.sub(replace, redacted)
    return redacted, kinds


def redact_deep(value: Any, path: str = "") -> tuple[Any, list[Redaction]]:
    """Redacts every string leaf (and object key) of a JSON value; returns a new value."""
    redactions: list[Redaction] = []

    def walk(node: Any, at: str) -> Any:
        if isinstance(node, str):
            text, kinds = redact_text(node)
            redactions.extend(Redaction(at or "$", kind) for kind in kinds)
            return text
        if isinstance(node, (list, tuple)):
            return [walk(item, f"{at}[{index}]") for index, item in enumerate(node)]
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, item in node.items():
                safe_key, kinds = redact_text(str(key))
                redactions.extend(Redaction(f"{at}.<key>", kind) for kind in kinds)
                out[safe_key] = walk(item, f"{at}.{safe_key}" if at else safe_key)
            return out
        return node

    return walk(value, path), redactions
