"""What both HTTP callers need of ``http.client`` beyond what it does by itself."""

from __future__ import annotations

import http.client


class BodyTooLarge(Exception):
    """An answer longer than the caller will hold."""


def read_body(response: http.client.HTTPResponse, limit: int) -> bytes:
    """The whole body, or an exception. ``read(amt)`` returns what arrived when the peer closes
    early, without a word; a body shorter than its Content-Length is a connection cut after the
    request left, so it is raised as ``IncompleteRead`` (as ``read()`` without ``amt`` would)."""
    data = response.read(limit)
    remaining = response.length
    if remaining:
        if len(data) >= limit:
            raise BodyTooLarge(f"the answer is longer than {limit} bytes")
        raise http.client.IncompleteRead(data, remaining)
    if len(data) >= limit and response.read(1):
        raise BodyTooLarge(f"the answer is longer than {limit} bytes")
    return data
