"""The executeWrite state machine (docs/contract.md §4) as one call, ``verify`` for the lookup by
operation_ref, and the step and outcome types they share.

Nothing here retries or waits: verify_operation, request_approval and escalate come back as
directives, and wait_and_retry comes back with ``not_before`` for the caller's scheduler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Generic, Literal, Mapping, Optional, Protocol, TypeVar, Union

from .api_types import Directive, OperationState, StepPolicy, SubmitAnswer, VerificationRecordedData
from .canonical_json import input_hash
from .envelope import DEFAULT_ENVELOPE_LIMITS, EnvelopeLimits, SideEffect, ToolEnvelope, validate_envelope
from .errors import LedgerError, LedgerRefusal
from .envelope import parse_iso_instant
from .normalizers.builders import NormalizeContext, call_window_passed, escalate, iso_instant, uncertain_outcome
from .normalizers.network_error import normalize_network_error

__all__ = [
    "LedgerApi",
    "WriteStep",
    "ToolCallContext",
    "ToolCall",
    "WriteOutcome",
    "OutcomeNotRecordedError",
    "LookupResult",
    "Lookup",
    "VerifyOutcome",
    "execute_write",
    "AttemptToRun",
    "run_attempt",
    "verify",
    "MAX_CALL_WINDOW_MS",
    "MIN_CALL_MARGIN_MS",
    "CALL_MARGIN_FRACTION",
    "call_margin_ms",
    "call_window_of",
]

Input = TypeVar("Input")


class LedgerApi(Protocol):
    """What execute_write, verify and recover need of the ledger; a LedgerClient is one."""

    def plan_step(self, operation_ref: str, data: Any, **options: Any) -> SubmitAnswer: ...
    def dispatch_attempt(self, operation_ref: str, data: Any, **options: Any) -> SubmitAnswer: ...
    def record_envelope(self, operation_ref: str, data: Any, **options: Any) -> SubmitAnswer: ...
    def record_verification(self, operation_ref: str, data: Any, **options: Any) -> SubmitAnswer: ...
    def get_events(self, operation_ref: str, **options: Any) -> Any: ...
    def recovery_items(self, **query: Any) -> Any: ...


@dataclass(frozen=True)
class WriteStep(Generic[Input]):
    """``operation_ref`` is durable, chosen before the first attempt, and the provider's idempotency
    key on every attempt. ``input_hash`` defaults to the canonical hash of ``input``."""

    operation_ref: str
    run_id: str
    tool: str
    input: Input
    side_effect: SideEffect = "write"
    policy: Optional[StepPolicy] = None
    input_hash: Optional[str] = None


@dataclass(frozen=True)
class ToolCallContext:
    operation_ref: str
    # Give this to the provider as its idempotency key: the same on every attempt of the step.
    idempotency_key: str
    # The attempt the ledger granted (1 for the first).
    attempt: int
    side_effect: SideEffect
    # The end of the attempt's call window (minus its margin), a ``time.monotonic()`` instant, or
    # None when the call is not bounded. Abort the request by then (``call_http_tool(deadline=)``),
    # so no byte of this attempt leaves after the ledger's call deadline: a blocking call cannot be
    # cut from outside. A tool that stops after its request may have left answers an envelope like
    # any failure; the SDK still records it.
    deadline: Optional[float] = None
    # The ledger's call deadline for the attempt (RFC 3339), when it answered one: send it to the
    # provider (``call_http_tool(call_deadline=)`` sends it as ``Ledger-Call-Deadline``), so a
    # provider that can enforce it refuses a late call.
    call_deadline: Optional[str] = None

    def time_left(self) -> Optional[float]:
        """Seconds left before ``deadline`` (0 when it has passed), or None when there is none."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


# The longest call window a dispatcher may declare (docs/contract.md §4.5): a day.
MAX_CALL_WINDOW_MS = 86_400_000
# The dispatcher's margin inside its window: 10 % of it, and never less than 50 ms.
MIN_CALL_MARGIN_MS = 50
CALL_MARGIN_FRACTION = 0.1


def call_margin_ms(window_ms: float) -> float:
    """How long before the end of its call window a dispatcher stops starting (and aborts) its
    call: 10 % of the window, at least 50 ms. It covers the rate difference of two monotonic clocks
    and the time between the check and the request's bytes leaving (docs/reliability.md "When an
    attempt may still reach the provider")."""
    return max(MIN_CALL_MARGIN_MS, window_ms * CALL_MARGIN_FRACTION)


def call_window_of(state: Mapping[str, Any], declared_ms: Optional[float] = None) -> Optional[float]:
    """The granted attempt's call window in ms: the ledger's ``call_deadline`` minus its grant
    instant (``since``), bounded by what the dispatcher declared. None when neither is known (a
    ledger that answers no call deadline, and no window declared): the call is then not bounded."""
    try:
        granted: Optional[float] = max(
            0.0, (parse_iso_instant(state["call_deadline"]) - parse_iso_instant(state["since"])).total_seconds() * 1000
        )
    except (KeyError, TypeError, ValueError):
        granted = None
    if granted is None:
        return declared_ms
    return granted if declared_ms is None else min(granted, declared_ms)


def _check_call_window(ms: Optional[int]) -> None:
    if ms is None:
        return
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 1 or ms > MAX_CALL_WINDOW_MS:
        raise ValueError(f"call_window_ms must be an integer from 1 to {MAX_CALL_WINDOW_MS}, got {ms!r}")


# Calls the tool once and returns its envelope (see the normalizers); an exception is treated as a
# network failure of the call.
ToolCall = Callable[[Input, ToolCallContext], Any]

WriteOutcomeKind = Literal["recorded", "refused", "replayed"]


@dataclass(frozen=True)
class Refusal:
    code: str
    detail: str


@dataclass(frozen=True)
class WriteOutcome:
    """``kind``: ``recorded`` (the tool ran once, its envelope is recorded; or, with ``tool_called``
    false, the call window had passed before the call and CALL_WINDOW_PASSED is recorded), ``refused`` (before a
    dispatch the tool was not called; after it, see ``refusal``), ``replayed`` (the step had already
    succeeded: the original success stands). ``directive`` is what the caller's scheduler does next."""

    kind: WriteOutcomeKind
    operation_ref: str
    status: str
    directive: Directive
    tool_called: bool = False
    not_before: Optional[str] = None
    attempt: Optional[int] = None
    envelope: Optional[ToolEnvelope] = None
    refusal: Optional[Refusal] = None
    success: Any = None
    state: Optional[OperationState] = None


class OutcomeNotRecordedError(Exception):
    """The tool ran but its envelope could not be recorded (the ledger was unreachable after the
    client's retries). The ledger still shows the attempt in flight, so nothing will dispatch it
    again: recover() verifies it by operation_ref, as after a crash."""

    def __init__(self, operation_ref: str, attempt: int, envelope: ToolEnvelope) -> None:
        super().__init__(f"the envelope of {operation_ref} attempt {attempt} was not recorded; recover() will verify it")
        self.operation_ref = operation_ref
        self.attempt = attempt
        self.envelope = envelope


def _no_directive() -> Directive:
    return {"next_action": "none", "attempts_remaining": 0}


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _refused(operation_ref: str, error: LedgerRefusal, **extra: Any) -> WriteOutcome:
    directive = error.directive or _no_directive()
    return WriteOutcome(
        kind="refused",
        operation_ref=operation_ref,
        status=error.state["status"] if error.state else "unplanned",
        directive=directive,
        not_before=directive.get("not_before"),
        refusal=Refusal(error.code, error.detail),
        state=error.state,
        **extra,
    )


def _answered(operation_ref: str, answer: SubmitAnswer, **extra: Any) -> WriteOutcome:
    fields: Dict[str, Any] = {
        "kind": "recorded",
        "operation_ref": operation_ref,
        "status": answer["state"]["status"],
        "directive": answer["directive"],
        "not_before": answer["directive"].get("not_before"),
        "state": answer["state"],
    }
    fields.update(extra)
    return WriteOutcome(**fields)


def _is_corrected_input(
    ledger: LedgerApi, step: WriteStep[Any], side_effect: str, hash_: str, refusal: LedgerRefusal, trace: Dict[str, Any]
) -> bool:
    """The same operation_ref planned with another input is refused (OPERATION_REF_REUSED), except in
    the one case it is the contract's own flow: the step asked for corrected input and this is it. So it
    is while the step is in needs_input, or when the ledger already granted a dispatch with this
    input hash (the correction was accepted earlier, and a later failure brought the caller back)."""
    state = refusal.state
    if not state or state.get("run_id") != step.run_id or state.get("tool") != step.tool or state.get("side_effect") != side_effect:
        return False
    if state["status"] == "needs_input":
        return True
    events = ledger.get_events(step.operation_ref, **trace)["events"]
    return any(event["type"] == "AttemptDispatched" and event["data"].get("input_hash") == hash_ for event in events)


def execute_write(
    ledger: LedgerApi,
    step: WriteStep[Input],
    tool_call: ToolCall[Input],
    *,
    now: Callable[[], datetime] = _utc_now,
    limits: Optional[EnvelopeLimits] = None,
    max_attempts_remaining: Optional[int] = None,
    default_retry_delay_ms: Optional[int] = None,
    verification_tool: Optional[str] = None,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
    call_window_ms: Optional[int] = None,
) -> WriteOutcome:
    """Plan the step (idempotent), ask the ledger to dispatch (the AttemptDispatched submit is the
    gate), call the tool with operation_ref as its idempotency key, record its envelope, and
    return the ledger's directive.

    - The tool is called only when the ledger granted this very attempt; a refusal returns, tool uncalled.
    - A raised tool call becomes an envelope through the network-error normalizer: after the request
      may have left, a write's outcome is unknown and must be verified.
    - Calling it again for the same step is safe: a succeeded step is replayed, never rerun.
    - ``call_window_ms`` (an integer 1..86_400_000) is the longest the tool call may stay open,
      declared to the ledger with the dispatch; see ``run_attempt`` for how the call is held to it.

    Ledger errors other than refusals (unreachable, unauthorized) are raised; before the tool ran
    nothing happened, after it the error is an OutcomeNotRecordedError.
    """
    _check_call_window(call_window_ms)  # before planning: a bad option leaves nothing behind
    side_effect = step.side_effect
    hash_ = step.input_hash or input_hash(step.input)
    ref = step.operation_ref
    trace = {"traceparent": traceparent, "tracestate": tracestate}

    plan: Dict[str, Any] = {"run_id": step.run_id, "tool": step.tool, "side_effect": side_effect, "input_hash": hash_}
    if step.policy:
        plan["policy"] = step.policy
    try:
        planned: OperationState = ledger.plan_step(ref, plan, **trace)["state"]
    except LedgerRefusal as error:
        corrected = error.code == "OPERATION_REF_REUSED" and _is_corrected_input(ledger, step, side_effect, hash_, error, trace)
        if not corrected or not error.state:
            return _refused(ref, error)
        planned = error.state

    return run_attempt(
        ledger,
        AttemptToRun(ref, planned["attempts_used"] + 1, hash_, step.input, side_effect),
        tool_call,
        now=now,
        limits=limits,
        max_attempts_remaining=max_attempts_remaining,
        default_retry_delay_ms=default_retry_delay_ms,
        verification_tool=verification_tool,
        traceparent=traceparent,
        tracestate=tracestate,
        call_window_ms=call_window_ms,
    )


@dataclass(frozen=True)
class AttemptToRun(Generic[Input]):
    """One attempt of a planned step; ``attempt`` is the attempts granted so far plus one."""

    operation_ref: str
    attempt: int
    input_hash: str
    input: Input
    side_effect: SideEffect = "write"


def run_attempt(
    ledger: LedgerApi,
    run: AttemptToRun[Input],
    tool_call: ToolCall[Input],
    *,
    now: Callable[[], datetime] = _utc_now,
    limits: Optional[EnvelopeLimits] = None,
    max_attempts_remaining: Optional[int] = None,
    default_retry_delay_ms: Optional[int] = None,
    verification_tool: Optional[str] = None,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
    lease: Optional[str] = None,
    call_window_ms: Optional[int] = None,
    not_after: Optional[float] = None,
) -> WriteOutcome:
    """One attempt of a planned step: the gate, the tool with operation_ref as its idempotency key,
    the envelope recorded. execute_write runs it after planning; the worker runs it for a dispatch
    item of the work feed, whose attempt and input hash the ledger gave. ``lease`` is sent with
    every fact (``Ledger-Lease``).

    The dispatcher's duty (docs/reliability.md "When an attempt may still reach the provider"): the
    call starts only while less than the granted window minus its margin has passed since the
    dispatch request was sent, on ``time.monotonic()``, and the tool is given that end as
    ``ToolCallContext.deadline``. A window found gone is not used: the tool is not called and a
    CALL_WINDOW_PASSED envelope is recorded. ``call_window_ms`` (an integer 1..86_400_000) is
    declared to the ledger as the attempt's ``call_window_ms``, and the call is held to it even when
    the ledger answers no call deadline. ``not_after``, a ``time.monotonic()`` instant, bounds the
    call too (a worker's lease end by its own clock)."""
    _check_call_window(call_window_ms)
    ref, attempt, side_effect = run.operation_ref, run.attempt, run.side_effect
    trace: Dict[str, Any] = {"traceparent": traceparent, "tracestate": tracestate}
    if lease:
        trace["lease"] = lease
    dispatch: Dict[str, Any] = {"attempt": attempt, "input_hash": run.input_hash}
    if call_window_ms is not None:
        dispatch["call_window_ms"] = call_window_ms
    # Before the request leaves, so before the ledger's grant: the window is counted from here, on a
    # clock no wall-clock step moves. A resend of the dispatch after a lost answer only makes it later.
    sent_at = time.monotonic()
    try:
        granted = ledger.dispatch_attempt(ref, dispatch, **trace)
    except LedgerRefusal as error:
        return _refused(ref, error, attempt=attempt)
    if granted.get("replayed"):
        return _answered(ref, granted, kind="replayed", success=granted.get("success"))
    # Only this very attempt, in flight, lets the tool run.
    if granted["state"]["status"] != "dispatched" or granted["state"].get("current_attempt") != attempt:
        return _answered(
            ref,
            granted,
            kind="refused",
            attempt=attempt,
            refusal=Refusal("ATTEMPT_MISMATCH", f"the ledger did not put attempt {attempt} in flight"),
        )

    def context() -> NormalizeContext:
        return NormalizeContext(
            operation_ref=ref,
            side_effect=side_effect,
            now=now(),
            max_attempts_remaining=max_attempts_remaining,
            default_retry_delay_ms=default_retry_delay_ms,
            verification_tool=verification_tool,
        )

    deadline = _call_deadline(sent_at, call_window_of(granted["state"], call_window_ms), not_after)
    if deadline is not None and time.monotonic() >= deadline:
        # Paused past the window (GC, a VM stop): the ledger may already take this attempt for one
        # that never happened, so the tool is not called, and the envelope says so.
        return _record_outcome(ledger, ref, attempt, call_window_passed(context()), context(), trace, tool_called=False)
    try:
        raw = tool_call(
            run.input,
            ToolCallContext(ref, ref, attempt, side_effect, deadline, granted["state"].get("call_deadline")),
        )
    except Exception as error:  # noqa: BLE001 - whatever the tool raised, the request may have left
        raw = normalize_network_error(error, context())
    envelope = _checked_envelope(raw, context(), limits)
    return _record_outcome(ledger, ref, attempt, envelope, context(), trace)


def _call_deadline(sent_at: float, window_ms: Optional[float], not_after: Optional[float]) -> Optional[float]:
    """The monotonic instant the call must neither start after nor stay open past: the end of the
    window counted from the dispatch's send (or ``not_after``, when earlier), less the margin."""
    ends = [end for end in (None if window_ms is None else sent_at + window_ms / 1000, not_after) if end is not None]
    if not ends:
        return None
    end = min(ends)
    return end - call_margin_ms(max(0.0, end - sent_at) * 1000) / 1000


def _checked_envelope(raw: Any, context: NormalizeContext, limits: Optional[EnvelopeLimits]) -> ToolEnvelope:
    """The envelope as the ledger will validate it. One that breaks the rules is not sent as it is:
    the tool did run, so for a write the outcome is unknown (verify), and for a read a person looks."""
    checked = validate_envelope(
        raw, operation_ref=context.operation_ref, side_effect=context.side_effect, limits=limits or DEFAULT_ENVELOPE_LIMITS
    )
    if checked.ok and checked.envelope is not None:
        return checked.envelope
    return _substitute(context)


def _substitute(context: NormalizeContext) -> ToolEnvelope:
    if context.side_effect == "write":
        return uncertain_outcome(context, "TOOL_RESULT_INVALID")
    return escalate(context, "TOOL_RESULT_INVALID", "internal")


def _record_outcome(
    ledger: LedgerApi,
    ref: str,
    attempt: int,
    envelope: ToolEnvelope,
    context: NormalizeContext,
    trace: Dict[str, Any],
    *,
    tool_called: bool = True,
) -> WriteOutcome:
    try:
        answer = ledger.record_envelope(ref, {"attempt": attempt, "envelope": envelope}, **trace)
        return _answered(ref, answer, tool_called=tool_called, attempt=attempt, envelope=envelope)
    except LedgerRefusal as error:
        return _refused(ref, error, tool_called=tool_called, attempt=attempt, envelope=envelope)
    except LedgerError as error:
        # The ledger's limits may be stricter than ours (its safe_details keys are configurable):
        # record the envelope that claims nothing rather than leave the attempt without an outcome.
        if error.code != "ENVELOPE_INVALID":
            raise OutcomeNotRecordedError(ref, attempt, envelope) from error
    substitute = _substitute(context)
    try:
        answer = ledger.record_envelope(ref, {"attempt": attempt, "envelope": substitute}, **trace)
        return _answered(ref, answer, tool_called=tool_called, attempt=attempt, envelope=substitute)
    except LedgerRefusal as error:
        return _refused(ref, error, tool_called=tool_called, attempt=attempt, envelope=substitute)
    except LedgerError as error:
        raise OutcomeNotRecordedError(ref, attempt, substitute) from error


# ---- verification -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LookupResult:
    """What a lookup by operation_ref found. ``found`` needs evidence: the provider's id of the write."""

    found: bool
    evidence_ref: Optional[str] = None
    result: Any = None

    @staticmethod
    def committed(evidence_ref: str, result: Any = None) -> "LookupResult":
        return LookupResult(True, evidence_ref, result)

    @staticmethod
    def not_found() -> "LookupResult":
        return LookupResult(False)


# Reads the provider by operation_ref (the idempotency key the write carried); raises when it cannot.
# Returns a LookupResult, or a dict {"found": bool, "evidence_ref": str, "result": ...}.
Lookup = Callable[[str], Union[LookupResult, Mapping[str, Any]]]


@dataclass(frozen=True)
class VerifyOutcome:
    kind: Literal["recorded", "refused"]
    operation_ref: str
    outcome: str
    status: str
    directive: Directive
    # For a premature not_found: when the consistency window ends and the check may run again.
    not_before: Optional[str] = None
    evidence_ref: Optional[str] = None
    refusal: Optional[Refusal] = None
    state: Optional[OperationState] = None


def _verification_of(found: Any, checked_at: str) -> VerificationRecordedData:
    if isinstance(found, LookupResult):
        found = {"found": found.found, "evidence_ref": found.evidence_ref, "result": found.result}
    if isinstance(found, Mapping):
        if found.get("found") is False:
            return {"outcome": "not_found", "checked_at": checked_at}
        evidence = found.get("evidence_ref")
        if found.get("found") is True and isinstance(evidence, str) and evidence != "":
            data: VerificationRecordedData = {"outcome": "found_committed", "checked_at": checked_at, "evidence_ref": evidence}
            if found.get("result") is not None:
                data["result"] = found["result"]
            return data
    # A lookup answer that is neither is no answer: never guess.
    return {"outcome": "lookup_unavailable", "checked_at": checked_at}


def verify(
    ledger: LedgerApi,
    operation_ref: str,
    lookup: Lookup,
    *,
    now: Callable[[], datetime] = _utc_now,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
    lease: Optional[str] = None,
) -> VerifyOutcome:
    """Runs the lookup by the step's own operation_ref and records what it found: found_committed
    (with evidence), not_found, or lookup_unavailable when the lookup raises or answers nonsense.
    The ledger decides what follows; a not_found inside the consistency window is refused with the
    instant it ends, which comes back as ``not_before`` (nothing here waits)."""
    try:
        data = _verification_of(lookup(operation_ref), iso_instant(now()))
    except Exception:  # noqa: BLE001 - a lookup that cannot answer is lookup_unavailable, never a guess
        data = {"outcome": "lookup_unavailable", "checked_at": iso_instant(now())}
    evidence = data.get("evidence_ref")
    try:
        trace: Dict[str, Any] = {"traceparent": traceparent, "tracestate": tracestate}
        if lease:
            trace["lease"] = lease
        answer = ledger.record_verification(operation_ref, data, **trace)
    except LedgerRefusal as error:
        directive = error.directive or _no_directive()
        return VerifyOutcome(
            kind="refused",
            operation_ref=operation_ref,
            outcome=data["outcome"],
            status=error.state["status"] if error.state else "unplanned",
            directive=directive,
            not_before=directive.get("not_before"),
            evidence_ref=evidence,
            refusal=Refusal(error.code, error.detail),
            state=error.state,
        )
    return VerifyOutcome(
        kind="recorded",
        operation_ref=operation_ref,
        outcome=data["outcome"],
        status=answer["state"]["status"],
        directive=answer["directive"],
        not_before=answer["directive"].get("not_before"),
        evidence_ref=evidence,
        state=answer["state"],
    )
