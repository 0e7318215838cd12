import type { JsonValue } from '../shared/json';
import { NEXT_ACTIONS, type ToolEnvelope } from './envelope/envelope.types';
import type { Redaction } from './envelope/redaction';
import { APPROVAL_DECISIONS, type ApprovalRecordedFactData } from '../facts/approval-recorded';
import { MAX_CALL_WINDOW_MS, type AttemptDispatchedFactData } from '../facts/attempt-dispatched';
import type { EnvelopeRecordedFactData } from '../facts/envelope-recorded';
import {
  MANUAL_OUTCOMES,
  MAX_REOPEN_ATTEMPTS,
  type EscalationAcknowledgedFactData,
  type OutcomeVerifiedManuallyFactData,
  type StepCancelledFactData,
  type StepReopenedFactData,
} from '../facts/operator-facts';
import { SIDE_EFFECTS, type StepPlannedFactData, type StepPolicyFactData } from '../facts/step-planned';
import { VERIFICATION_OUTCOMES, type VerificationRecordedFactData } from '../facts/verification-recorded';

/** Bumped when an event's data changes shape; `evolve` reads every version it has ever written. */
export const EVENT_SCHEMA_VERSION = 1;

/**
 * Each fact's data is defined once, as a schema literal in ../facts, and its type derived from it;
 * each vocabulary is an `as const` array there with its type derived here (as envelope.types.ts
 * does), so the types, the edge's validation, the event codec and the published schemas share one list.
 */
export { SIDE_EFFECTS };
export type SideEffect = (typeof SIDE_EFFECTS)[number];

/**
 * The policy as stored: the submitted one with the ledger's defaults filled in. Its
 * `dispatch_timeout_ms` is how long a dispatched attempt may go without an envelope, and without a
 * worker holding its lease, before the work feed hands the step out for verification by the same
 * operation_ref; logs written before it existed lack it: readers use `dispatchTimeoutMs`.
 */
export type StepPolicy = Required<Omit<StepPolicyFactData, 'verification_tool'>> &
  Pick<StepPolicyFactData, 'verification_tool'>;

export const DEFAULT_POLICY: StepPolicy = {
  max_attempts: 3,
  consistency_window_ms: 30_000,
  max_consecutive_dependency_failures: 3,
  dispatch_timeout_ms: 60_000,
};

/** The policy's dispatch timeout, read defensively: a plan stored before the field existed has none. */
export function dispatchTimeoutMs(policy: Partial<StepPolicy> | undefined): number {
  const value = policy?.dispatch_timeout_ms;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : DEFAULT_POLICY.dispatch_timeout_ms;
}

// ---- Facts the runtime submits -------------------------------------------------------------------

/**
 * A plan as stored: its policy complete, and `input` (when the runtime wants the ledger's work feed
 * to hand it to a worker) a JSON value whose canonical hash is the input_hash; it never holds secrets.
 */
export type StepPlannedData = Omit<StepPlannedFactData, 'policy' | 'input'> & { policy: StepPolicy; input?: JsonValue };

export { MAX_CALL_WINDOW_MS };

/**
 * A dispatch as stored. Its `call_window_ms` is the longest the dispatcher's call may stay open, as
 * it declares it: it starts the call within it and aborts it at its end (docs/reliability.md, "When
 * an attempt may still reach the provider").
 */
export type AttemptDispatchedData = Omit<AttemptDispatchedFactData, 'input'> & {
  /** The attempt's input as the dispatcher sent it (checked against input_hash, never a secret). */
  input?: JsonValue;
  /**
   * Set by the ledger when it grants the attempt: the last instant (ledger clock) the attempt may
   * reach the provider from the dispatcher's side. A `not_found` is conclusive only a consistency
   * window after it (docs/contract.md §4.5). Logs written before it existed lack it: readers use
   * the dispatch instant plus the plan's dispatch timeout (`callDeadlineOf`).
   */
  call_deadline?: string;
};

export type EnvelopeRecordedData = Omit<EnvelopeRecordedFactData, 'envelope'> & {
  envelope: ToolEnvelope;
  /** What was redacted from the envelope before it was stored (path and kind, never the secret). */
  redactions: Redaction[];
};

export { VERIFICATION_OUTCOMES };
export type VerificationOutcome = (typeof VERIFICATION_OUTCOMES)[number];

export type VerificationRecordedData = VerificationRecordedFactData & { redactions: Redaction[] };

export { APPROVAL_DECISIONS };
export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];

/**
 * Its data's one definition is the schema literal in facts/approval-recorded.ts (docs/contract.md §4.4):
 * `input_hash`, when given, is the hash the step asked approval for; logs written before it existed lack it.
 */
export type ApprovalRecordedData = ApprovalRecordedFactData;

// ---- Facts an operator records (docs/contract.md §4.10) -------------------------------------------

export { MANUAL_OUTCOMES, MAX_REOPEN_ATTEMPTS };
export type ManualOutcome = (typeof MANUAL_OUTCOMES)[number];
export type OutcomeVerifiedManuallyData = OutcomeVerifiedManuallyFactData;
export type StepCancelledData = StepCancelledFactData;
export type StepReopenedData = StepReopenedFactData;
export type EscalationAcknowledgedData = EscalationAcknowledgedFactData;

export type OperatorFact =
  | { type: 'OutcomeVerifiedManually'; data: OutcomeVerifiedManuallyData }
  | { type: 'StepCancelled'; data: StepCancelledData }
  | { type: 'StepReopened'; data: StepReopenedData }
  | { type: 'EscalationAcknowledged'; data: EscalationAcknowledgedData };

export const OPERATOR_FACT_TYPES = [
  'OutcomeVerifiedManually',
  'StepCancelled',
  'StepReopened',
  'EscalationAcknowledged',
] as const satisfies readonly OperatorFact['type'][];
export type OperatorFactType = (typeof OPERATOR_FACT_TYPES)[number];

export function isOperatorFactType(type: string): type is OperatorFactType {
  return OPERATOR_FACT_TYPES.some((known) => known === type);
}

export type SubmittedFact =
  | OperatorFact
  | { type: 'StepPlanned'; data: StepPlannedData }
  | { type: 'AttemptDispatched'; data: AttemptDispatchedData }
  | { type: 'EnvelopeRecorded'; data: EnvelopeRecordedData }
  | { type: 'VerificationRecorded'; data: VerificationRecordedData }
  | { type: 'ApprovalRecorded'; data: ApprovalRecordedData };

export const SUBMITTED_FACT_TYPES = [
  'StepPlanned',
  'AttemptDispatched',
  'EnvelopeRecorded',
  'VerificationRecorded',
  'ApprovalRecorded',
  ...OPERATOR_FACT_TYPES,
] as const satisfies readonly SubmittedFact['type'][];
export type SubmittedFactType = (typeof SUBMITTED_FACT_TYPES)[number];

// ---- Decisions the ledger derives ------------------------------------------------------------------

export const STEP_STATUSES = [
  'planned',
  'dispatched',
  'needs_input',
  'retry_scheduled',
  'verifying',
  'awaiting_approval',
  'retry_ready',
  'succeeded',
  'escalated',
  'cancelled',
] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** What a view of a step may say: a step's status, or `unplanned` for an operation never planned. */
export const STEP_VIEW_STATUSES = ['unplanned', ...STEP_STATUSES] as const;
export type StepViewStatus = (typeof STEP_VIEW_STATUSES)[number];

export const TERMINAL_STATUSES = ['succeeded', 'escalated', 'cancelled'] as const satisfies readonly StepStatus[];

/** Whether a status (of any origin: a view, a query, a stored document) is a terminal step status. */
export function isTerminalStatus(status: string): boolean {
  return TERMINAL_STATUSES.some((terminal) => terminal === status);
}

/**
 * What the runtime may do next: the envelope's vocabulary, plus `dispatch` (an attempt may run),
 * `await_outcome` (an attempt is in flight: record what the tool answered, or verify it after a
 * crash, and never dispatch again) and `none` (the step is terminal).
 */
export const DIRECTIVE_ACTIONS = [...NEXT_ACTIONS, 'dispatch', 'await_outcome', 'none'] as const;
export type DirectiveAction = (typeof DIRECTIVE_ACTIONS)[number];

export interface Directive {
  next_action: DirectiveAction;
  not_before?: string;
  attempts_remaining: number;
}

export interface TransitionRecordedData {
  from: StepStatus | 'unplanned';
  to: StepStatus;
  /** A stable code saying why (a refusal code, an envelope's code, or a fact's name). */
  reason: string;
  /** The event id of the fact that caused the transition. */
  caused_by: string;
  directive: Directive;
  /**
   * When the from-state began (its `since`, ledger clock); absent when `from` is `unplanned`. How
   * long the step stood in a state is evidence of its own, and it lets a projection time pending
   * recovery from this one event instead of remembering, per operation, when each state began.
   * Logs written before it existed lack it: readers must treat it as optional.
   */
  from_since?: string;
}

export interface DispatchRefusedData {
  attempt: number;
  input_hash: string;
  /** The stable refusal code of the invariant that refused the dispatch. */
  code: string;
  /** When the refusal replays an earlier success (DUPLICATE_PREVENTED), the attempt that succeeded. */
  replayed_attempt?: number;
  /** An input refused APPROVAL_REQUIRED, as its dispatcher sent it: what the approver is asked about (§4.4). */
  input?: JsonValue;
}

/**
 * An envelope that came back for an attempt that is no longer the one in flight (its dispatcher was
 * paused, partitioned or slow, and the step moved on). It is refused as ATTEMPT_MISMATCH, and kept
 * as evidence: what that attempt did is part of the operation's history (docs/contract.md §4.9).
 */
export interface LateOutcomeRecordedData {
  attempt: number;
  envelope: ToolEnvelope;
  redactions: Redaction[];
  /**
   * An outcome that may have reached the provider (a success, or an unknown or committed failure) of
   * an attempt after a later attempt was granted: the provider may hold two writes (§4.9).
   */
  possible_duplicate: boolean;
}

export type DerivedEvent =
  | { type: 'TransitionRecorded'; data: TransitionRecordedData }
  | { type: 'DispatchRefused'; data: DispatchRefusedData }
  | { type: 'LateOutcomeRecorded'; data: LateOutcomeRecordedData };

export type LedgerEvent = SubmittedFact | DerivedEvent;

export const DERIVED_EVENT_TYPES = [
  'TransitionRecorded',
  'DispatchRefused',
  'LateOutcomeRecorded',
] as const satisfies readonly DerivedEvent['type'][];
export const LEDGER_EVENT_TYPES = [...SUBMITTED_FACT_TYPES, ...DERIVED_EVENT_TYPES] as const;
export type LedgerEventType = (typeof LEDGER_EVENT_TYPES)[number];

/** A ledger event as folded: its fact plus when the ledger recorded it. */
export type RecordedEvent = LedgerEvent & { event_id: string; recorded_at: string; revision?: number };
