import type { JsonValue } from '../shared/json';
import { NEXT_ACTIONS, type ToolEnvelope } from './envelope/envelope.types';
import type { Redaction } from './envelope/redaction';

/** Bumped when an event's data changes shape; `evolve` reads every version it has ever written. */
export const EVENT_SCHEMA_VERSION = 1;

export type SideEffect = 'read' | 'write';

export interface StepPolicy {
  /** Attempts the step may make in all, the first included. */
  max_attempts: number;
  /** How long after a dispatch a `not_found` lookup is still inconclusive. */
  consistency_window_ms: number;
  verification_tool?: string;
  /** Consecutive dependency failures before the step escalates. */
  max_consecutive_dependency_failures: number;
  /**
   * How long a dispatched attempt may go without an envelope, and without a worker holding its
   * lease, before the work feed hands the step out for verification by the same operation_ref
   * (its worker is taken to have died). Logs written before it existed lack it: readers use
   * DEFAULT_POLICY's value (`dispatchTimeoutMs`).
   */
  dispatch_timeout_ms: number;
}

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

export interface StepPlannedData {
  run_id: string;
  tool: string;
  side_effect: SideEffect;
  input_hash: string;
  policy: StepPolicy;
  /**
   * The tool's input itself, when the runtime wants the ledger's work feed to hand it to a worker
   * (a step started with one call). Its canonical hash is the input_hash; it never holds secrets.
   */
  input?: JsonValue;
}

export interface AttemptDispatchedData {
  attempt: number;
  input_hash: string;
}

export interface EnvelopeRecordedData {
  attempt: number;
  envelope: ToolEnvelope;
  /** What was redacted from the envelope before it was stored (path and kind, never the secret). */
  redactions: Redaction[];
}

export type VerificationOutcome = 'found_committed' | 'not_found' | 'lookup_unavailable';

export interface VerificationRecordedData {
  outcome: VerificationOutcome;
  checked_at: string;
  evidence_ref?: string;
  result?: unknown;
  redactions: Redaction[];
}

export interface ApprovalRecordedData {
  decision: 'granted' | 'denied';
  approver: string;
  reason?: string;
}

export type SubmittedFact =
  | { type: 'StepPlanned'; data: StepPlannedData }
  | { type: 'AttemptDispatched'; data: AttemptDispatchedData }
  | { type: 'EnvelopeRecorded'; data: EnvelopeRecordedData }
  | { type: 'VerificationRecorded'; data: VerificationRecordedData }
  | { type: 'ApprovalRecorded'; data: ApprovalRecordedData };

export type SubmittedFactType = SubmittedFact['type'];
export const SUBMITTED_FACT_TYPES: readonly SubmittedFactType[] = [
  'StepPlanned',
  'AttemptDispatched',
  'EnvelopeRecorded',
  'VerificationRecorded',
  'ApprovalRecorded',
];

// ---- Decisions the ledger derives ------------------------------------------------------------------

export type StepStatus =
  | 'planned'
  | 'dispatched'
  | 'needs_input'
  | 'retry_scheduled'
  | 'verifying'
  | 'awaiting_approval'
  | 'retry_ready'
  | 'succeeded'
  | 'escalated';

export const STEP_STATUSES: readonly StepStatus[] = [
  'planned',
  'dispatched',
  'needs_input',
  'retry_scheduled',
  'verifying',
  'awaiting_approval',
  'retry_ready',
  'succeeded',
  'escalated',
];

export const TERMINAL_STATUSES: readonly StepStatus[] = ['succeeded', 'escalated'];

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
}

export type DerivedEvent =
  | { type: 'TransitionRecorded'; data: TransitionRecordedData }
  | { type: 'DispatchRefused'; data: DispatchRefusedData };

export type LedgerEvent = SubmittedFact | DerivedEvent;
export type LedgerEventType = LedgerEvent['type'];

/** A ledger event as folded: its fact plus when the ledger recorded it. */
export type RecordedEvent = LedgerEvent & { event_id: string; recorded_at: string; revision?: number };
