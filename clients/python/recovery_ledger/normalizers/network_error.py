"""A raised network error to an envelope, told apart on the standard library's exception types.

"A timeout before a request leaves the process is different from a timeout after the remote system
may have accepted it." Errors are classified by their type and ``errno`` only, never their message
(a tool adapter may put upstream text in one, and prose must not decide that a write did not happen).
The error, its ``__cause__`` chain (``raise ... from``), ``urllib.error.URLError.reason`` and the
members of an exception group are read; the implicit ``__context__`` is not, since an error raised
while handling another (a retry inside the adapter that then sent) would inherit a "before send"
it has no right to; "before send" is claimed only when every signal says
so, and one signal of a sent request, or of doubt, wins.

The mapping (docs/sdk-python.md has it as a table):

==========================================================  ===========  ==================
exception                                                    phase        kind
==========================================================  ===========  ==================
``socket.gaierror`` (name resolution)                        before_send  dns
``ConnectionRefusedError``; ``OSError`` with errno
ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN,
ENETDOWN, EADDRNOTAVAIL                                      before_send  connect
``ssl.SSLCertVerificationError``                             before_send  tls_certificate
``http.client.InvalidURL``                                   before_send  other
``ConnectionResetError`` (and ``http.client.RemoteDisconnected``),
``BrokenPipeError``, ``ConnectionAbortedError``; errno
ECONNRESET, EPIPE, ECONNABORTED                              after_send   reset
``http.client.IncompleteRead``, ``BadStatusLine``,
``LineTooLong`` and other ``HTTPException`` answers;
``urllib.error.HTTPError`` (an answer came back)             after_send   protocol
``TimeoutError`` / ``socket.timeout`` (errno ETIMEDOUT too)  unknown      timeout
``ssl.SSLError`` other than certificate verification         unknown      tls
``http.client.ImproperConnectionState``                      unknown      other
anything else                                                unknown      other
==========================================================  ===========  ==================

A timeout is ``unknown`` because Python raises the same ``TimeoutError`` for a connect that timed
out and for a send or read that did; a caller who knows the phase says so with ``phase=``
(``call_http_tool`` connects first and passes ``before_send`` for what fails there).
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
import urllib.error
from dataclasses import dataclass
from typing import Any, List, Literal, Optional, Set

from ..envelope import ToolError
from .builders import NormalizeContext, escalate, uncertain_outcome, wait_and_retry

__all__ = ["SendPhase", "NetworkFailureKind", "NetworkErrorClassification", "classify_network_error", "normalize_network_error"]

SendPhase = Literal["before_send", "after_send", "unknown"]
NetworkFailureKind = Literal["dns", "connect", "tls_certificate", "tls", "reset", "timeout", "protocol", "other"]


@dataclass(frozen=True)
class NetworkErrorClassification:
    phase: SendPhase
    kind: NetworkFailureKind
    # The decisive exception type (and errno name) found on the error or its chain.
    code: Optional[str] = None


# No connection was ever made, so no request byte can have reached a server.
_CONNECT_ERRNOS = {
    getattr(errno, name)
    for name in ("ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENETDOWN", "EADDRNOTAVAIL")
    if hasattr(errno, name)
}
# A connection existed: the request, or part of it, may have reached the server.
_RESET_ERRNOS = {getattr(errno, name) for name in ("ECONNRESET", "EPIPE", "ECONNABORTED") if hasattr(errno, name)}


def _name(error: BaseException) -> str:
    number = getattr(error, "errno", None)
    label = type(error).__name__
    if isinstance(number, int) and number in errno.errorcode:
        return f"{label}:{errno.errorcode[number]}"
    return label


def _signal_of(error: BaseException) -> Optional[NetworkErrorClassification]:
    code = _name(error)
    # Order matters: the subclasses before the classes they refine.
    if isinstance(error, socket.gaierror):
        return NetworkErrorClassification("before_send", "dns", code)
    if isinstance(error, ssl.SSLCertVerificationError):
        return NetworkErrorClassification("before_send", "tls_certificate", code)
    if isinstance(error, ConnectionRefusedError):
        return NetworkErrorClassification("before_send", "connect", code)
    if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return NetworkErrorClassification("after_send", "reset", code)
    if isinstance(error, urllib.error.HTTPError):
        return NetworkErrorClassification("after_send", "protocol", code)
    if isinstance(error, http.client.InvalidURL):
        return NetworkErrorClassification("before_send", "other", code)
    if isinstance(error, http.client.ImproperConnectionState):
        return NetworkErrorClassification("unknown", "other", code)
    if isinstance(error, http.client.HTTPException):
        return NetworkErrorClassification("after_send", "protocol", code)
    if isinstance(error, ssl.SSLError):
        return NetworkErrorClassification("unknown", "tls", code)
    if isinstance(error, TimeoutError):
        return NetworkErrorClassification("unknown", "timeout", code)
    if isinstance(error, OSError) and not isinstance(error, urllib.error.URLError):
        number = error.errno
        if number in _CONNECT_ERRNOS:
            return NetworkErrorClassification("before_send", "connect", code)
        if number in _RESET_ERRNOS:
            return NetworkErrorClassification("after_send", "reset", code)
        if number == errno.ETIMEDOUT:
            return NetworkErrorClassification("unknown", "timeout", code)
        return NetworkErrorClassification("unknown", "other", code)
    return None


def _collect_signals(error: BaseException) -> List[NetworkErrorClassification]:
    signals: List[NetworkErrorClassification] = []
    seen: Set[int] = set()

    def visit(node: Any, depth: int) -> None:
        if not isinstance(node, BaseException) or id(node) in seen or depth > 8:
            return
        seen.add(id(node))
        signal = _signal_of(node)
        if signal is not None:
            signals.append(signal)
        if isinstance(node, urllib.error.URLError):
            visit(node.reason, depth + 1)
        visit(node.__cause__, depth + 1)
        members = getattr(node, "exceptions", None)  # ExceptionGroup, and look-alikes before 3.11
        if isinstance(members, (list, tuple)):
            for member in members:
                visit(member, depth + 1)

    visit(error, 0)
    return signals


def classify_network_error(error: BaseException) -> NetworkErrorClassification:
    """Whether the request can have left the process, from the exception's types only."""
    signals = _collect_signals(error)
    for phase in ("after_send", "unknown", "before_send"):
        for signal in signals:
            if signal.phase == phase:
                return signal
    return NetworkErrorClassification("unknown", "other")


def normalize_network_error(
    error: BaseException, context: NormalizeContext, *, phase: Optional[SendPhase] = None
) -> ToolError:
    """A raised network error to an envelope. Before the request can have left: nothing committed,
    and a later attempt is safe (certificate failures go to a person: waiting does not fix them).
    After, or in doubt: for a write the outcome is unknown and must be verified by operation_ref; a
    read only failed, and may be retried later.

    ``phase`` is what the caller knows about an error that cannot tell (a timeout); pass
    ``before_send`` only when the request provably was not handed to the socket. An error that
    says ``after_send`` wins over it.
    """
    classified = classify_network_error(error)
    effective = classified.phase
    if effective == "unknown" and phase is not None:
        effective = phase
    if effective == "before_send":
        if classified.kind == "tls_certificate":
            return escalate(context, "TLS_FAILURE", "dependency")
        if classified.kind == "tls":
            code = "TLS_FAILURE"
        elif classified.kind in ("dns", "connect", "timeout"):
            # Python raises one TimeoutError for connect and for later; placed before send by the
            # caller, it is a provider that could not be reached in time.
            code = "NETWORK_UNREACHABLE"
        else:
            code = "REQUEST_NOT_SENT"
        return wait_and_retry(context, code, None)
    return uncertain_outcome(context)
