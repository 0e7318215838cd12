"""Retry-After (RFC 9110 §10.2.3): delay-seconds (1*DIGIT) or an HTTP-date.

Read as the TypeScript SDK reads it (test/vectors/retry-after.json is checked by both): a date must
say GMT, since a zone-less one would be read in some local zone the sender did not mean, and a
malformed header is ignored rather than guessed at.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from email.message import Message
from email.utils import parsedate_tz
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

__all__ = ["retry_after_ms", "header_value", "Headers"]

Headers = Union[Mapping[str, Any], Message, Iterable[Tuple[str, str]], None]

_MAX_SAFE_INTEGER = 2**53 - 1
_GMT = re.compile(r"\bGMT\b", re.ASCII)


def retry_after_ms(value: Optional[str], now: datetime) -> Optional[int]:
    """The wait in milliseconds from ``now``, never negative; None when absent or neither form."""
    if value is None:
        return None
    text = value.strip()
    if text == "":
        return None
    if text.isascii() and text.isdigit():
        seconds = int(text)
        return seconds * 1000 if seconds <= _MAX_SAFE_INTEGER else None
    if not _GMT.search(text):
        return None
    parts = parsedate_tz(text)
    if parts is None:
        return None
    year, month, day, hour, minute, second = parts[:6]
    try:
        at = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:
        return None
    reference = now if now.tzinfo is not None else now.replace(tzinfo=timezone.utc)
    return max(0, round((at - reference).total_seconds() * 1000))


def header_value(headers: Headers, name: str) -> Optional[str]:
    """One header from a mapping (case-insensitively), an ``http.client.HTTPMessage`` /
    ``email.message.Message``, or a list of (name, value) pairs; the first value when repeated."""
    if headers is None:
        return None
    if isinstance(headers, Message):
        found = headers.get(name)
        return None if found is None else str(found)
    wanted = name.lower()
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, found in items:
        if str(key).lower() != wanted or found is None:
            continue
        if isinstance(found, (list, tuple)):
            return None if len(found) == 0 else str(found[0])
        return str(found)
    return None
