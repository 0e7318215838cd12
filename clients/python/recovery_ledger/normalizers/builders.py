"""The one place a normalizer's envelope is assembled, so every output has the same discipline.

Upstream text is untrusted input: no provider wording ever reaches ``agent_message`` or
``user_message``, only the fixed sentences below, which are the TypeScript SDK's word for word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Literal, Mapping, Optional

from ..envelope import CommitState, ErrorCategory, NextAction, RetryDirective, SafeDetailValue, SideEffect, ToolError

__all__ = [
    "NormalizeContext",
    "NormalizedCode",
    "NORMALIZED_CODE_FACTS",
    "DEFAULT_RETRY_DELAY_MS",
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "DEFAULT_INPUT_FIX_ATTEMPTS",
    "DEFAULT_RETRY_ATTEMPTS",
    "agent_message",
    "user_message",
    "iso_instant",
    "tool_error",
    "uncertain_outcome",
    "wait_and_retry",
    "correct_input",
    "escalate",
    "request_approval",
    "call_window_passed",
    "CALL_WINDOW_RETRY_DELAY_MS",
]

DEFAULT_RETRY_DELAY_MS = 1000
# A day: a provider asking for a longer wait is not asking for an automatic retry.
DEFAULT_MAX_RETRY_DELAY_MS = 24 * 60 * 60 * 1000
# After correct_input, "one new, validated request with the same operation reference".
DEFAULT_INPUT_FIX_ATTEMPTS = 1
DEFAULT_RETRY_ATTEMPTS = 3
# After a call window passed unused: the next attempt is not held back for long, nothing was sent.
CALL_WINDOW_RETRY_DELAY_MS = 1000

NormalizedCode = Literal[
    "INVALID_INPUT",
    "RESOURCE_NOT_FOUND",
    "PAYLOAD_TOO_LARGE",
    "UPSTREAM_UNAUTHENTICATED",
    "MISSING_APPROVAL",
    "CONFLICT",
    "VERSION_CONFLICT",
    "UPSTREAM_REJECTED",
    "RATE_LIMITED",
    "DEPENDENCY_UNAVAILABLE",
    "NETWORK_UNREACHABLE",
    "TLS_FAILURE",
    "REQUEST_NOT_SENT",
    "REQUEST_INTERRUPTED",
    "OUTCOME_UNKNOWN",
    "ACCEPTED_NOT_CONFIRMED",
    "UPSTREAM_ERROR",
    "TOOL_FAILURE_REPORTED",
    "TOOL_RESULT_INVALID",
    "UNVERIFIED_RESULT",
    "CALL_WINDOW_PASSED",
]

NORMALIZED_CODE_FACTS: Mapping[str, str] = {
    "INVALID_INPUT": "The provider rejected the input; nothing was changed.",
    "RESOURCE_NOT_FOUND": "The provider did not find a resource the input refers to; nothing was changed.",
    "PAYLOAD_TOO_LARGE": "The provider refused the request as too large; nothing was changed.",
    "UPSTREAM_UNAUTHENTICATED": "The provider did not accept the credentials; nothing was changed.",
    "MISSING_APPROVAL": "The provider refused the action as not permitted; nothing was changed.",
    "CONFLICT": "The provider refused the action in the current state of the resource; nothing was changed.",
    "VERSION_CONFLICT": "The resource changed since it was read; nothing was changed.",
    "UPSTREAM_REJECTED": "The provider rejected the request; nothing was changed.",
    "RATE_LIMITED": "The provider is rate limiting requests; nothing was changed.",
    "DEPENDENCY_UNAVAILABLE": "The provider is unavailable.",
    "NETWORK_UNREACHABLE": "The provider could not be reached; the request never left.",
    "TLS_FAILURE": "The connection to the provider failed its TLS checks; the request never left.",
    "REQUEST_NOT_SENT": "The request was cancelled before it was sent.",
    "REQUEST_INTERRUPTED": "The request was interrupted before an answer came back.",
    "OUTCOME_UNKNOWN": "The write may have completed.",
    "ACCEPTED_NOT_CONFIRMED": "The provider accepted the request but has not confirmed it.",
    "UPSTREAM_ERROR": "The tool reported an error; its text was withheld as untrusted.",
    "TOOL_FAILURE_REPORTED": "The tool reported a failure.",
    "TOOL_RESULT_INVALID": "The tool returned a result that is not a valid envelope.",
    "UNVERIFIED_RESULT": "The tool reported success without a structured result.",
    "CALL_WINDOW_PASSED": "The call window the ledger granted had passed before the call; the request was not sent.",
}

_NEXT_ACTION_SENTENCES: Mapping[str, str] = {
    "correct_input": "Correct the input before a new attempt; an unchanged retry is refused.",
    "wait_and_retry": "A new attempt may run after not_before.",
    "verify_operation": "Verify operation_ref before any new write.",
    "request_approval": "Request approval; do not call the tool again until it is granted.",
    "escalate": "Escalate to a person; do not retry automatically.",
}

_USER_MESSAGES: Mapping[str, str] = {
    "correct_input": "I need corrected details before I can do this.",
    "wait_and_retry": "The request is waiting and will be retried shortly.",
    "verify_operation": "The request is being checked before anything is sent again.",
    "request_approval": "This needs approval before it can continue.",
    "escalate": "This needs attention from a person before it can continue.",
}


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class NormalizeContext:
    """What every normalizer needs besides the thing it normalizes.

    ``now`` is the runtime's clock for the instants an envelope names (the ledger judges time by
    its own); pass it for reproducible output.
    """

    operation_ref: str
    side_effect: SideEffect
    now: datetime = field(default_factory=_utc_now)
    # Attempts a retryable failure may still make; the ledger applies the lower of this and the policy.
    max_attempts_remaining: Optional[int] = None
    # The wait when a retryable failure gives no Retry-After.
    default_retry_delay_ms: Optional[int] = None
    # The longest wait a retry may be scheduled after; beyond it the failure goes to a person.
    max_retry_delay_ms: Optional[int] = None
    # Named in safe_details of an unknown outcome, so the runtime knows which lookup proves it.
    verification_tool: Optional[str] = None


def agent_message(code: str, next_action: NextAction) -> str:
    return f"{NORMALIZED_CODE_FACTS[code]} {_NEXT_ACTION_SENTENCES[next_action]}"


def user_message(next_action: NextAction) -> str:
    return _USER_MESSAGES[next_action]


def iso_instant(moment: datetime) -> str:
    """``Date.prototype.toISOString``: UTC, milliseconds, ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _instant_after(now: datetime, delay_ms: float) -> str:
    return iso_instant(now + timedelta(milliseconds=max(0.0, delay_ms)))


def tool_error(
    context: NormalizeContext,
    *,
    code: str,
    category: ErrorCategory,
    commit_state: CommitState,
    next_action: NextAction,
    directive: RetryDirective,
    max_attempts_remaining: int,
    not_before: Optional[str] = None,
    safe_details: Optional[Mapping[str, Optional[SafeDetailValue]]] = None,
) -> ToolError:
    details: Dict[str, SafeDetailValue] = {k: v for k, v in (safe_details or {}).items() if v is not None}
    retry: Dict[str, Any] = {"directive": directive, "max_attempts_remaining": max(0, math.floor(max_attempts_remaining))}
    if not_before is not None:
        retry["not_before"] = not_before
    return {
        "ok": False,
        "code": code,
        "category": category,
        "commit_state": commit_state,
        "retry": retry,  # type: ignore[typeddict-item]
        "next_action": next_action,
        "operation_ref": context.operation_ref,
        "safe_details": details,
        "agent_message": agent_message(code, next_action),
        "user_message": user_message(next_action),
    }


def uncertain_outcome(context: NormalizeContext, code: str = "OUTCOME_UNKNOWN") -> ToolError:
    """The write may have committed: nothing may run again before a lookup by operation_ref. The same
    uncertainty on a read is only a failed read, safe to try again later."""
    if context.side_effect == "write":
        return tool_error(
            context,
            code=code,
            category="dependency",
            commit_state="unknown",
            next_action="verify_operation",
            directive="never",
            max_attempts_remaining=0,
            safe_details={"verification_tool": context.verification_tool},
        )
    return wait_and_retry(context, "REQUEST_INTERRUPTED" if code == "OUTCOME_UNKNOWN" else code, None)


def wait_and_retry(context: NormalizeContext, code: str, delay_ms: Optional[float]) -> ToolError:
    """Nothing ran; a new attempt may run after an absolute not_before (the scheduler owns the wait).
    A wait beyond max_retry_delay_ms escalates rather than parking the step for years."""
    wait = delay_ms if delay_ms is not None else (
        context.default_retry_delay_ms if context.default_retry_delay_ms is not None else DEFAULT_RETRY_DELAY_MS
    )
    limit = context.max_retry_delay_ms if context.max_retry_delay_ms is not None else DEFAULT_MAX_RETRY_DELAY_MS
    if wait > limit:
        return escalate(context, code, "dependency")
    return tool_error(
        context,
        code=code,
        category="dependency",
        commit_state="not_committed",
        next_action="wait_and_retry",
        directive="after_delay",
        not_before=_instant_after(context.now, wait),
        max_attempts_remaining=(
            context.max_attempts_remaining if context.max_attempts_remaining is not None else DEFAULT_RETRY_ATTEMPTS
        ),
        safe_details=None if delay_ms is None else {"retry_after": math.ceil(delay_ms / 1000)},
    )


def correct_input(context: NormalizeContext, code: str, field_name: Optional[str]) -> ToolError:
    return tool_error(
        context,
        code=code,
        category="validation",
        commit_state="not_committed",
        next_action="correct_input",
        directive="after_input_fix",
        max_attempts_remaining=(
            context.max_attempts_remaining if context.max_attempts_remaining is not None else DEFAULT_INPUT_FIX_ATTEMPTS
        ),
        safe_details={"field": field_name},
    )


def escalate(
    context: NormalizeContext, code: str, category: ErrorCategory, commit_state: CommitState = "not_committed"
) -> ToolError:
    # An unknown write must be verified, never just escalated (docs/contract.md §2 consistency rule).
    if commit_state == "unknown" and context.side_effect == "write":
        return uncertain_outcome(context, code)
    return tool_error(
        context,
        code=code,
        category=category,
        commit_state="not_committed" if context.side_effect == "read" else commit_state,
        next_action="escalate",
        directive="never",
        max_attempts_remaining=0,
    )


def request_approval(context: NormalizeContext, code: str) -> ToolError:
    return tool_error(
        context,
        code=code,
        category="authorization",
        commit_state="not_committed",
        next_action="request_approval",
        directive="never",
        max_attempts_remaining=0,
    )


def call_window_passed(context: NormalizeContext) -> ToolError:
    """The dispatcher found its call window gone before the call started (docs/reliability.md "When
    an attempt may still reach the provider"): the tool was not called, so nothing committed, and a
    later attempt may run after a second."""
    return tool_error(
        context,
        code="CALL_WINDOW_PASSED",
        category="internal",
        commit_state="not_committed",
        next_action="wait_and_retry",
        directive="after_delay",
        not_before=_instant_after(context.now, CALL_WINDOW_RETRY_DELAY_MS),
        max_attempts_remaining=(
            context.max_attempts_remaining if context.max_attempts_remaining is not None else DEFAULT_RETRY_ATTEMPTS
        ),
    )
