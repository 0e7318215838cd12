"""One HTTP call to a provider, answered as an envelope, on ``http.client``.

The phases are explicit, so a failure is placed by where it happened rather than guessed from an
exception: ``connect()`` (and for HTTPS the TLS handshake) runs first, and what fails there is
before send; from the first byte of the request on, a failure may be after send, and for a write
the outcome is then unknown. Reading the body is part of the call: a connection that breaks after
the status line is a failure after send.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from datetime import datetime
from typing import Any, Callable, Mapping, Optional, Sequence

from ._http import read_body
from .envelope import SideEffect, ToolEnvelope
from .normalizers.builders import NormalizeContext, _utc_now, call_window_passed
from .normalizers.http_response import HttpResponse, normalize_http_response
from .normalizers.input_fields import input_fields_of
from .normalizers.network_error import normalize_network_error

__all__ = ["CALL_DEADLINE_HEADER", "call_http_tool"]

_MAX_BODY_BYTES = 16 * 1024 * 1024

# The header that carries the attempt's call deadline to the provider (RFC 3339, the ledger's clock).
CALL_DEADLINE_HEADER = "Ledger-Call-Deadline"


class _WindowPassed(Exception):
    """The window was found gone at the write: not one byte of the request was handed to the socket."""


def _checked(base: type, time_left: Callable[[], float]) -> Any:
    """``base`` (HTTP or HTTPS connection) whose first ``send`` checks the window right before
    ``sendall``: a process that stood still between the check on connect and its first byte (a GC
    pause, a VM stop, SIGSTOP) does not write. What remains between the check and the write is a
    few lines of ``send`` (docs/reliability.md "How close the check sits to the write")."""

    class Checked(base):  # type: ignore[misc, valid-type]
        _first_byte_sent = False

        def send(self, data: Any) -> None:
            if not self._first_byte_sent:
                if time_left() <= 0:
                    raise _WindowPassed()
                self._first_byte_sent = True
            super().send(data)

    return Checked


def call_http_tool(
    url: str,
    *,
    operation_ref: str,
    side_effect: SideEffect,
    method: Optional[str] = None,
    body: Any = None,
    headers: Optional[Mapping[str, str]] = None,
    timeout: float = 10.0,
    deadline: Optional[float] = None,
    call_deadline: Optional[str] = None,
    idempotency_header: Optional[str] = "Idempotency-Key",
    ssl_context: Optional[ssl.SSLContext] = None,
    now: Callable[[], datetime] = _utc_now,
    max_attempts_remaining: Optional[int] = None,
    default_retry_delay_ms: Optional[int] = None,
    max_retry_delay_ms: Optional[int] = None,
    verification_tool: Optional[str] = None,
    code_map: Optional[Mapping[str, str]] = None,
    input_fields: Optional[Sequence[str]] = None,
    is_failure: Optional[Callable[[Any], bool]] = None,
    result: Optional[Callable[[Any], Any]] = None,
    evidence_ref: Optional[Callable[[Any], Optional[str]]] = None,
) -> ToolEnvelope:
    """Sends ``body`` as JSON (POST by default when there is one, else GET) with ``operation_ref`` as
    the idempotency key (``idempotency_header=None`` sends none) and returns the envelope.

    ``timeout`` is seconds per socket operation. ``deadline`` is a ``time.monotonic()`` instant the
    whole call ends by: pass ``ToolCallContext.deadline``, the end of the attempt's call window. A
    request not yet sent by then is not sent (CALL_WINDOW_PASSED, nothing committed); one that is
    sent is cut off at it (for a write the outcome is then unknown), so no byte of the attempt
    leaves after the ledger's call deadline (docs/reliability.md "When an attempt may still reach
    the provider"); the last check is made in the connection's ``send``, right before the first
    ``sendall``. ``call_deadline`` (``ToolCallContext.call_deadline``, the ledger's call deadline) is
    sent as the ``Ledger-Call-Deadline`` header, so a provider that can enforce it refuses a late
    call. The normalizer options are those of
    ``normalize_http_response``; ``input_fields`` defaults to the body's own field names, since a
    provider may name an invalid field only if the request carried it."""

    def context() -> NormalizeContext:
        return NormalizeContext(
            operation_ref=operation_ref,
            side_effect=side_effect,
            now=now(),
            max_attempts_remaining=max_attempts_remaining,
            default_retry_delay_ms=default_retry_delay_ms,
            max_retry_delay_ms=max_retry_delay_ms,
            verification_tool=verification_tool,
        )

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"url must be an http(s) URL, got {url[:80]!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request_headers = {"Accept": "application/json"}
    payload = None
    if body is not None:
        payload = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        request_headers["Content-Type"] = "application/json"
    if idempotency_header:
        request_headers[idempotency_header] = operation_ref
    if call_deadline is not None:
        request_headers[CALL_DEADLINE_HEADER] = call_deadline
    request_headers.update(headers or {})

    def time_left() -> float:
        return timeout if deadline is None else deadline - time.monotonic()

    if time_left() <= 0:
        return call_window_passed(context())
    socket_timeout = min(timeout, time_left())
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = _checked(http.client.HTTPSConnection, time_left)(
            parts.hostname, parts.port, timeout=socket_timeout, context=ssl_context
        )
    else:
        connection = _checked(http.client.HTTPConnection, time_left)(parts.hostname, parts.port, timeout=socket_timeout)
    cut = _Cutoff(connection)
    try:
        try:
            connection.connect()
        except Exception as error:  # noqa: BLE001 - nothing of the request was written yet
            return normalize_network_error(error, context(), phase="before_send")
        if time_left() <= 0:
            return call_window_passed(context())  # connected, but not one byte of the request written
        if deadline is not None:
            cut.at(time_left())
        try:
            connection.request(method or ("POST" if payload is not None else "GET"), target, body=payload, headers=request_headers)
            response = connection.getresponse()
            status, answer_headers = response.status, response.headers
            raw = read_body(response, _MAX_BODY_BYTES)
        except _WindowPassed:
            return call_window_passed(context())  # checked at the write: not one byte left
        except Exception as error:  # noqa: BLE001 - from the first byte on, the request may have left
            if cut.fired:
                # Whatever the cut made the read raise, it was the deadline: say timeout, not reset.
                error = TimeoutError("the call window passed")
            return normalize_network_error(error, context(), phase="after_send")
    finally:
        cut.cancel()
        connection.close()

    text = raw.decode("utf-8", errors="replace")
    parsed: Any = None if text == "" else text
    try:
        if text != "":
            parsed = json.loads(text)
    except ValueError:
        pass  # not JSON: the text stays as the body; the normalizer never copies it into a message
    return normalize_http_response(
        HttpResponse(status=status, headers=answer_headers, body=parsed),
        context(),
        code_map=code_map,
        input_fields=input_fields if input_fields is not None else input_fields_of(body),
        is_failure=is_failure,
        result=result,
        evidence_ref=evidence_ref,
    )


class _Cutoff:
    """Ends a call at its deadline: a blocking socket operation cannot be cancelled from its own
    thread, so a timer shuts the socket down, which makes the send or read in progress fail."""

    def __init__(self, connection: http.client.HTTPConnection) -> None:
        self._connection = connection
        self._timer: Optional[threading.Timer] = None
        self.fired = False

    def at(self, seconds: float) -> None:
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the call ended on its own

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
