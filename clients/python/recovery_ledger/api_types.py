"""The wire shapes of the HTTP contract (docs/contract.md §9) as TypedDicts, snake_case as on the
wire. Projections' fields are the server's to grow, so those are plain dicts."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict, Union

from .envelope import SideEffect, ToolEnvelope

__all__ = [
    "StepStatus",
    "DirectiveAction",
    "VerificationOutcome",
    "Directive",
    "OperationState",
    "SubmitResult",
    "SubmitAnswer",
    "StepPolicy",
    "StepPlannedData",
    "AttemptDispatchedData",
    "EnvelopeRecordedData",
    "VerificationRecordedData",
    "ApprovalRecordedData",
    "SubmittedEvent",
    "StoredEvent",
    "OperationEvents",
    "RecoveryItem",
    "RecoveryPage",
    "ProblemDetails",
]

StepStatus = Literal[
    "unplanned",
    "planned",
    "dispatched",
    "needs_input",
    "retry_scheduled",
    "verifying",
    "awaiting_approval",
    "retry_ready",
    "succeeded",
    "escalated",
]
DirectiveAction = Literal[
    "correct_input", "wait_and_retry", "verify_operation", "request_approval", "escalate", "dispatch", "none"
]
VerificationOutcome = Literal["found_committed", "not_found", "lookup_unavailable"]


class _DirectiveRequired(TypedDict):
    next_action: DirectiveAction
    attempts_remaining: int


class Directive(_DirectiveRequired, total=False):
    not_before: str


class _OperationStateRequired(TypedDict):
    operation_ref: str
    status: StepStatus
    revision: int
    attempts_used: int
    current_attempt: int
    attempts_remaining: int


class OperationState(_OperationStateRequired, total=False):
    run_id: str
    tool: str
    side_effect: SideEffect
    policy: Dict[str, Any]
    not_before: str
    approval: str
    reason: str
    since: str
    # While dispatched: the instant the attempt's call must be over, on the ledger's clock (§4.5).
    call_deadline: str
    approval_input_hash: str
    # The input that approval binds: {input_hash, recorded, input?} (docs/contract.md §4.4).
    approval_input: Dict[str, Any]
    possible_duplicate: Dict[str, Any]
    last_envelope: Any
    last_verification: Any
    success: Any


class SubmitResult(TypedDict):
    event_id: str
    status: Literal["appended", "duplicate"]


class _SubmitAnswerRequired(TypedDict):
    revision: int
    position: int
    state: OperationState
    directive: Directive
    results: List[SubmitResult]


class SubmitAnswer(_SubmitAnswerRequired, total=False):
    replayed: bool  # a dispatch on a succeeded step: the original success, replayed
    success: Any


class StepPolicy(TypedDict, total=False):
    max_attempts: int
    consistency_window_ms: int
    verification_tool: str
    max_consecutive_dependency_failures: int


class _StepPlannedRequired(TypedDict):
    run_id: str
    tool: str
    side_effect: SideEffect
    input_hash: str


class StepPlannedData(_StepPlannedRequired, total=False):
    policy: StepPolicy


class _AttemptDispatchedRequired(TypedDict):
    attempt: int  # the previous attempts plus one; the first is 1
    input_hash: str


class AttemptDispatchedData(_AttemptDispatchedRequired, total=False):
    # The longest the dispatcher's call may stay open (1..86_400_000 ms); the ledger's call deadline
    # is at most this long after its grant (docs/contract.md §4.5).
    call_window_ms: int


class EnvelopeRecordedData(TypedDict):
    attempt: int
    envelope: ToolEnvelope


class _VerificationRecordedRequired(TypedDict):
    outcome: VerificationOutcome
    checked_at: str  # when the lookup ran (evidence only: the ledger judges windows by its own clock)


class VerificationRecordedData(_VerificationRecordedRequired, total=False):
    evidence_ref: str
    result: Any


class _ApprovalRecordedRequired(TypedDict):
    decision: Literal["granted", "denied"]
    approver: str


class ApprovalRecordedData(_ApprovalRecordedRequired, total=False):
    reason: str


FactData = Union[StepPlannedData, AttemptDispatchedData, EnvelopeRecordedData, VerificationRecordedData, ApprovalRecordedData]


class _SubmittedEventRequired(TypedDict):
    type: Literal["StepPlanned", "AttemptDispatched", "EnvelopeRecorded", "VerificationRecorded", "ApprovalRecorded"]
    data: Any


class SubmittedEvent(_SubmittedEventRequired, total=False):
    event_id: str  # chosen by the client before the first send when absent


class _StoredEventRequired(TypedDict):
    revision: int
    position: int
    event_id: str
    type: str
    recorded_at: str
    actor: str
    schema_version: int
    data: Dict[str, Any]
    prev_hash: str
    hash: str


class StoredEvent(_StoredEventRequired, total=False):
    causation_event_id: str
    traceparent: str


class _OperationEventsRequired(TypedDict):
    operation_ref: str
    revision: int
    events: List[StoredEvent]


class OperationEvents(_OperationEventsRequired, total=False):
    as_of_revision: int
    state: OperationState


class _RecoveryItemRequired(TypedDict):
    operation_ref: str
    tool: str
    run_id: str
    status: Literal["dispatched", "verifying"]
    since: str
    attempt: int


class RecoveryItem(_RecoveryItemRequired, total=False):
    attempts_used: int
    side_effect: SideEffect
    reason: str
    verification_tool: str
    revision: int


class _RecoveryPageRequired(TypedDict):
    items: List[RecoveryItem]


class RecoveryPage(_RecoveryPageRequired, total=False):
    next_cursor: str
    as_of_position: int


class _ProblemRequired(TypedDict):
    type: str
    title: str
    status: int
    code: str
    detail: str


class ProblemDetails(_ProblemRequired, total=False):
    instance: str
    field: str
    directive: Directive
    state: OperationState
    results: List[SubmitResult]
    retry_after_seconds: int
