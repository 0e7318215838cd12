"""Every error the client raises: the stable code first, the human detail second.

The classes mirror the TypeScript SDK's (``LedgerRefusal`` for a 409, and so on); ``code`` is the
ledger's registry code (the README's error table), or one of the client's own three when no
problem+json came back.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Type

from .api_types import Directive, OperationState, SubmitResult

__all__ = [
    "CLIENT_ERROR_CODES",
    "LedgerError",
    "LedgerRefusal",
    "LedgerInvalidRequest",
    "LedgerAuthError",
    "LedgerNotFound",
    "LedgerUnavailable",
    "is_ledger_refusal",
    "ledger_error_from_answer",
]

# Failures the client sees before any problem+json comes back.
CLIENT_ERROR_CODES = (
    "LEDGER_UNREACHABLE",  # no answer: unreachable, or the connection broke, after every retry
    "LEDGER_TIMEOUT",  # no answer within the timeout, after every retry
    "LEDGER_BAD_RESPONSE",  # an answer that is not the documented shape (a proxy's HTML page)
)


class LedgerError(Exception):
    """``status`` is the HTTP status, 0 when no answer came back. ``field`` is the field at fault as
    a dotted path; ``directive`` and ``state`` say what the runtime may do next, when the ledger
    said so; ``retry_after_seconds`` is the ledger's advice (body or ``Retry-After``)."""

    def __init__(
        self,
        *,
        code: str,
        status: int,
        detail: str,
        title: Optional[str] = None,
        type: Optional[str] = None,  # noqa: A002 - the problem+json member's name
        field: Optional[str] = None,
        directive: Optional[Directive] = None,
        state: Optional[OperationState] = None,
        results: Optional[List[SubmitResult]] = None,
        retry_after_seconds: Optional[int] = None,
    ) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.status = status
        self.detail = detail
        self.title = title
        self.type = type
        self.field = field
        self.directive = directive
        self.state = state
        self.results = results
        self.retry_after_seconds = retry_after_seconds


class LedgerRefusal(LedgerError):
    """A 409: an invariant refused the fact. For a dispatch, the runtime must not call the tool."""


class LedgerInvalidRequest(LedgerError):
    """A 400 / 413 / 415 / 422: the request itself is wrong; resending it unchanged cannot help."""


class LedgerAuthError(LedgerError):
    """A 401 / 403: the key is missing or unknown, or its role or tenant does not allow this."""


class LedgerNotFound(LedgerError):
    """A 404: no such operation, run or route."""


class LedgerUnavailable(LedgerError):
    """A 429 / 5xx or no answer: the ledger could not take the request now."""


def _class_for(status: int) -> Type[LedgerError]:
    if status == 409:
        return LedgerRefusal
    if status in (401, 403):
        return LedgerAuthError
    if status == 404:
        return LedgerNotFound
    if status == 429 or status >= 500 or status == 0:
        return LedgerUnavailable
    if status >= 400:
        return LedgerInvalidRequest
    return LedgerError


def ledger_error_from_answer(status: int, body: Any, retry_after_seconds: Optional[int] = None) -> LedgerError:
    """The typed error for an error answer. A body that is not the ledger's problem+json (a proxy in
    between) gives LEDGER_BAD_RESPONSE with the status, and none of the body's text."""
    error_class = _class_for(status)
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        return error_class(
            code="LEDGER_BAD_RESPONSE",
            status=status,
            detail=f"the ledger answered {status} without a problem body",
            retry_after_seconds=retry_after_seconds,
        )
    problem: Dict[str, Any] = body

    def text(name: str) -> Optional[str]:
        value = problem.get(name)
        return value if isinstance(value, str) else None

    advised = problem.get("retry_after_seconds")
    return error_class(
        code=problem["code"],
        status=status,
        detail=text("detail") or text("title") or problem["code"],
        title=text("title"),
        type=text("type"),
        field=text("field"),
        directive=problem["directive"] if isinstance(problem.get("directive"), dict) else None,
        state=problem["state"] if isinstance(problem.get("state"), dict) else None,
        results=problem["results"] if isinstance(problem.get("results"), list) else None,
        retry_after_seconds=advised if isinstance(advised, int) and not isinstance(advised, bool) else retry_after_seconds,
    )


def is_ledger_refusal(error: BaseException, code: Optional[str] = None) -> bool:
    return isinstance(error, LedgerRefusal) and (code is None or error.code == code)
