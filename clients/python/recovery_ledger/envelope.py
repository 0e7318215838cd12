"""The tool result envelope (docs/contract.md §2): its vocabularies, its shapes as TypedDicts, and
the validation the ledger applies at its edge, so a runtime can check an envelope before sending it.

The rules are the ledger's own (src/domain/envelope/validate-envelope.ts): an envelope this accepts
is one the ledger stores, and one it refuses is answered there with 422 ENVELOPE_INVALID naming the
same field. (TypedDicts use ``total=False`` subclasses rather than ``NotRequired`` so that Python
3.10 can read them.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Literal, Mapping, NoReturn, Optional, Tuple, TypedDict, Union, cast, get_args

from .redaction import Redaction, redact_deep

__all__ = [
    "CommitState",
    "RetryDirective",
    "NextAction",
    "ErrorCategory",
    "SideEffect",
    "SafeDetailValue",
    "COMMIT_STATES",
    "RETRY_DIRECTIVES",
    "NEXT_ACTIONS",
    "ERROR_CATEGORIES",
    "DEFAULT_SAFE_DETAIL_KEYS",
    "STABLE_CODE_PATTERN",
    "RetryAdvice",
    "Verification",
    "ToolError",
    "ToolSuccess",
    "ToolEnvelope",
    "EnvelopeLimits",
    "DEFAULT_ENVELOPE_LIMITS",
    "EnvelopeValidation",
    "is_iso_instant",
    "validate_envelope",
]

CommitState = Literal["not_committed", "committed", "unknown"]
RetryDirective = Literal["never", "after_delay", "after_input_fix"]
NextAction = Literal["correct_input", "wait_and_retry", "verify_operation", "request_approval", "escalate"]
ErrorCategory = Literal["validation", "authorization", "conflict", "dependency", "internal"]
SideEffect = Literal["read", "write"]
SafeDetailValue = Union[str, int, float, bool]

COMMIT_STATES: Tuple[CommitState, ...] = get_args(CommitState)
RETRY_DIRECTIVES: Tuple[RetryDirective, ...] = get_args(RetryDirective)
NEXT_ACTIONS: Tuple[NextAction, ...] = get_args(NextAction)
ERROR_CATEGORIES: Tuple[ErrorCategory, ...] = get_args(ErrorCategory)
DEFAULT_SAFE_DETAIL_KEYS: Tuple[str, ...] = (
    "field",
    "allowed_values",
    "retry_after",
    "resource_version",
    "verification_tool",
    "limit",
)

STABLE_CODE_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\Z")
_ISO_INSTANT = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))\Z", re.ASCII
)
MAX_ATTEMPTS_REMAINING = 1000


class _RetryAdviceRequired(TypedDict):
    directive: RetryDirective
    max_attempts_remaining: int


class RetryAdvice(_RetryAdviceRequired, total=False):
    not_before: str  # an absolute ISO-8601 instant, never a vague duration


class _VerificationRequired(TypedDict):
    checked_at: str


class Verification(_VerificationRequired, total=False):
    evidence_ref: str


class ToolError(TypedDict):
    ok: Literal[False]
    code: str
    category: ErrorCategory
    commit_state: CommitState
    retry: RetryAdvice
    next_action: NextAction
    operation_ref: str
    safe_details: Dict[str, SafeDetailValue]
    agent_message: str
    user_message: str


class ToolSuccess(TypedDict):
    ok: Literal[True]
    operation_ref: str
    commit_state: Literal["committed"]
    result: Any
    verification: Verification


ToolEnvelope = Union[ToolError, ToolSuccess]


@dataclass(frozen=True)
class EnvelopeLimits:
    """The ledger's limits; ``safe_detail_keys`` mirrors its ``LEDGER_SAFE_DETAIL_KEYS``."""

    safe_detail_keys: Tuple[str, ...] = DEFAULT_SAFE_DETAIL_KEYS
    max_safe_details: int = 16
    max_safe_detail_value_length: int = 256
    max_message_length: int = 500
    max_code_length: int = 64
    max_operation_ref_length: int = 200


DEFAULT_ENVELOPE_LIMITS = EnvelopeLimits()


@dataclass(frozen=True)
class EnvelopeValidation:
    """``ok`` with the envelope normalised and redacted, or the field at fault and why."""

    ok: bool
    envelope: Optional[ToolEnvelope] = None
    redactions: Tuple[Redaction, ...] = ()
    field: Optional[str] = None
    reason: Optional[str] = None


def is_iso_instant(value: Any) -> bool:
    """An ISO-8601 instant with a zone, judged as JavaScript's Date.parse judges it (day up to 31,
    24:00:00 allowed), so that both SDKs accept the same strings."""
    if not isinstance(value, str):
        return False
    match = _ISO_INSTANT.match(value)
    if not match:
        return False
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    fraction = match.group(7) or ""
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute <= 59 and second <= 59):
        return False
    if hour > 24 or (hour == 24 and (minute or second or fraction.strip("0"))):
        return False
    if match.group(8) is None and (int(match.group(10)) > 23 or int(match.group(11)) > 59):
        return False
    return True


def parse_iso_instant(value: str) -> datetime:
    """The instant an ISO-8601 string names (the forms is_iso_instant accepts), in UTC."""
    match = _ISO_INSTANT.match(value)
    if not match or not is_iso_instant(value):
        raise ValueError(f"not an ISO-8601 instant: {value[:40]!r}")
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    micro = int((match.group(7) or "0").ljust(6, "0")[:6])
    base = datetime(year, month, 1, tzinfo=timezone.utc) + timedelta(
        days=day - 1, hours=hour, minutes=minute, seconds=second, microseconds=micro
    )
    if match.group(8) is None:
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        base = base - offset if match.group(9) == "+" else base + offset
    return base


class _Violation(Exception):
    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(field_name)
        self.field = field_name
        self.reason = reason


def _fail(field_name: str, reason: str) -> NoReturn:
    raise _Violation(field_name, reason)


def _only_keys(value: Mapping[str, Any], allowed: Tuple[str, ...], at: str) -> None:
    for key in value:
        if key not in allowed:
            _fail(f"{at}.{key}" if at else str(key), "is not a field of the envelope")


def _one_of(value: Any, allowed: Tuple[str, ...], field_name: str) -> Any:
    if not isinstance(value, str) or value not in allowed:
        _fail(field_name, f"must be one of {', '.join(allowed)}")
    return value


def _bounded_string(value: Any, field_name: str, maximum: int) -> str:
    if not isinstance(value, str):
        _fail(field_name, "must be a string")
    # JavaScript counts UTF-16 code units; so does this, so both refuse the same strings.
    if len(value.encode("utf-16-le", "surrogatepass")) // 2 > maximum:
        _fail(field_name, f"must be at most {maximum} characters")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_operation_ref(value: Any, operation_ref: str) -> str:
    if value != operation_ref:
        _fail("operation_ref", "must be the operation the envelope is recorded on")
    return operation_ref


def _check_safe_details(value: Any, limits: EnvelopeLimits) -> Dict[str, SafeDetailValue]:
    if not isinstance(value, dict):
        _fail("safe_details", "must be an object")
    if len(value) > limits.max_safe_details:
        _fail("safe_details", f"must have at most {limits.max_safe_details} keys")
    for key, detail in value.items():
        at = f"safe_details.{key}"
        if key not in limits.safe_detail_keys:
            _fail(at, "is not an allowed detail key")
        if isinstance(detail, str):
            _bounded_string(detail, at, limits.max_safe_detail_value_length)
        elif _is_number(detail):
            if detail != detail or detail in (float("inf"), float("-inf")):
                _fail(at, "must be a finite number")
        elif not isinstance(detail, bool):
            _fail(at, "must be a string, number or boolean")
    return dict(value)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and float(value).is_integer()


def _check_retry(value: Any, required: bool) -> RetryAdvice:
    if not isinstance(value, dict):
        _fail("retry", "must be an object")
    _only_keys(value, ("directive", "not_before", "max_attempts_remaining"), "retry")
    directive = _one_of(value.get("directive"), RETRY_DIRECTIVES, "retry.directive")
    retry: RetryAdvice = {"directive": directive, "max_attempts_remaining": 0}
    if "not_before" in value:
        if not is_iso_instant(value["not_before"]):
            _fail("retry.not_before", "must be an absolute ISO-8601 instant")
        retry["not_before"] = value["not_before"]
    remaining = value.get("max_attempts_remaining")
    if "max_attempts_remaining" not in value and not required:
        return retry
    bound = f"must be an integer from 0 to {MAX_ATTEMPTS_REMAINING}"
    if not isinstance(remaining, (int, float)) or not _is_integer(remaining):
        _fail("retry.max_attempts_remaining", bound)
    if not 0 <= remaining <= MAX_ATTEMPTS_REMAINING:
        _fail("retry.max_attempts_remaining", bound)
    retry["max_attempts_remaining"] = int(remaining)
    return retry


def _implied_next_action(directive: str) -> NextAction:
    if directive == "after_delay":
        return "wait_and_retry"
    if directive == "after_input_fix":
        return "correct_input"
    return "escalate"


_ERROR_FIELDS = (
    "ok",
    "code",
    "category",
    "commit_state",
    "retry",
    "next_action",
    "operation_ref",
    "safe_details",
    "agent_message",
    "user_message",
)


def _check_error(data: Mapping[str, Any], operation_ref: str, side_effect: str, limits: EnvelopeLimits) -> ToolError:
    _only_keys(data, _ERROR_FIELDS, "")
    full = side_effect == "write"
    if full:
        for name in _ERROR_FIELDS:
            if name not in data:
                _fail(name, "is required")
    code = _bounded_string(data.get("code"), "code", limits.max_code_length)
    if not STABLE_CODE_PATTERN.match(code):
        _fail("code", "must be UPPER_SNAKE_CASE")
    retry = _check_retry(data.get("retry"), full)

    def optional(name: str, default: Any, check: Any) -> Any:
        # A missing key is JavaScript's undefined; a JSON null is a value, and checked as one.
        return check(data[name]) if name in data else default

    envelope: ToolError = {
        "ok": False,
        "code": code,
        "category": optional("category", "internal", lambda v: _one_of(v, ERROR_CATEGORIES, "category")),
        "commit_state": optional("commit_state", "not_committed", lambda v: _one_of(v, COMMIT_STATES, "commit_state")),
        "retry": retry,
        "next_action": optional(
            "next_action", _implied_next_action(retry["directive"]), lambda v: _one_of(v, NEXT_ACTIONS, "next_action")
        ),
        "operation_ref": optional("operation_ref", operation_ref, lambda v: _check_operation_ref(v, operation_ref)),
        "safe_details": optional("safe_details", {}, lambda v: _check_safe_details(v, limits)),
        "agent_message": optional(
            "agent_message", "", lambda v: _bounded_string(v, "agent_message", limits.max_message_length)
        ),
        "user_message": optional("user_message", "", lambda v: _bounded_string(v, "user_message", limits.max_message_length)),
    }
    _check_consistency(envelope, side_effect)
    return envelope


def _check_consistency(envelope: ToolError, side_effect: str) -> None:
    """The consistency rules of docs/contract.md §2; each names the field a runtime has to fix."""
    commit_state, retry, next_action = envelope["commit_state"], envelope["retry"], envelope["next_action"]
    if commit_state == "committed":
        _fail("commit_state", "ok: false with committed is contradictory")
    if commit_state == "unknown" and side_effect == "write":
        if retry["directive"] != "never":
            _fail("retry.directive", "must be never when a write is unknown: verify first")
        if next_action != "verify_operation":
            _fail("next_action", "must be verify_operation when a write is unknown")
    if next_action == "wait_and_retry":
        if retry["directive"] != "after_delay":
            _fail("retry.directive", "must be after_delay with wait_and_retry")
        if "not_before" not in retry:
            _fail("retry.not_before", "is required with wait_and_retry")
    if next_action == "correct_input":
        if commit_state != "not_committed":
            _fail("commit_state", "must be not_committed with correct_input")
        if retry["directive"] != "after_input_fix":
            _fail("retry.directive", "must be after_input_fix with correct_input")


def _check_success(data: Mapping[str, Any], operation_ref: str, limits: EnvelopeLimits) -> ToolSuccess:
    _only_keys(data, ("ok", "operation_ref", "commit_state", "result", "verification"), "")
    _check_operation_ref(data.get("operation_ref"), operation_ref)
    if data.get("commit_state") != "committed":
        _fail("commit_state", "must be committed when ok is true")
    if "result" not in data:
        _fail("result", "is required")
    verification = data.get("verification")
    if not isinstance(verification, dict):
        _fail("verification", "must be an object")
    _only_keys(verification, ("checked_at", "evidence_ref"), "verification")
    if not is_iso_instant(verification.get("checked_at")):
        _fail("verification.checked_at", "must be an ISO-8601 instant")
    checked: Verification = {"checked_at": verification["checked_at"]}
    if "evidence_ref" in verification:
        checked["evidence_ref"] = _bounded_string(
            verification["evidence_ref"], "verification.evidence_ref", limits.max_operation_ref_length
        )
    return {"ok": True, "operation_ref": operation_ref, "commit_state": "committed", "result": data["result"], "verification": checked}


def validate_envelope(
    value: Any,
    *,
    operation_ref: str,
    side_effect: SideEffect,
    limits: EnvelopeLimits = DEFAULT_ENVELOPE_LIMITS,
) -> EnvelopeValidation:
    """Validates an envelope as the ledger does and returns it normalised and redacted."""
    try:
        if not isinstance(value, dict):
            return EnvelopeValidation(ok=False, field="envelope", reason="must be an object")
        if not isinstance(value.get("ok"), bool):
            return EnvelopeValidation(ok=False, field="ok", reason="must be true or false")
        if value["ok"]:
            success = _check_success(value, operation_ref, limits)
            redacted, redactions = redact_deep({"result": success["result"], "verification": success["verification"]})
            envelope: ToolEnvelope = cast(ToolSuccess, {**success, **redacted})
        else:
            error = _check_error(value, operation_ref, side_effect, limits)
            redacted, redactions = redact_deep(
                {
                    "agent_message": error["agent_message"],
                    "user_message": error["user_message"],
                    "safe_details": error["safe_details"],
                }
            )
            envelope = cast(ToolError, {**error, **redacted})
        return EnvelopeValidation(ok=True, envelope=envelope, redactions=tuple(redactions))
    except _Violation as violation:
        return EnvelopeValidation(ok=False, field=violation.field, reason=violation.reason)
