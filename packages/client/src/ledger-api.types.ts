/**
 * The wire shapes of docs/contract.md §9, typed from the same source as the server: the domain's vocabularies
 * and the ledger service's answer types. Type-only imports, so nothing of the server is loaded at
 * run time by a runtime that imports the client.
 */
import type {
  Directive,
  DirectiveAction,
  EventView,
  FromSchema,
  LeaseView,
  OperationEvents as ServerOperationEvents,
  OperationProblem,
  OperatorFactOutcome as ServerOperatorFactOutcome,
  OperatorFactType,
  SideEffect,
  StepStatus,
  StepView,
  SubmitAnswer as ServerSubmitAnswer,
  SubmitResult,
  SUBMITTED_FACTS,
  SubmittedFactType,
  VerificationOutcome,
  WorkAnswer,
  WorkItem,
  WorkLease,
} from '@recovery-ledger/core';
import type { ToolEnvelope } from '@recovery-ledger/core/envelope';

export type { LeaseView, OperationProblem, WorkAnswer, WorkItem, WorkLease };

export type {
  Directive,
  DirectiveAction,
  SideEffect,
  StepStatus,
  SubmitResult,
  SubmittedFactType,
  VerificationOutcome,
};

/** The state of one operation as the ledger answers it; `unplanned` only before its first fact. */
export interface OperationState extends StepView {
  status: StepStatus | 'unplanned';
}

export interface SubmitAnswer extends Omit<ServerSubmitAnswer, 'state'> {
  state: OperationState;
}

/**
 * Each fact's data as submitted: the type derived from its one definition, the schema literal in
 * the core's facts (the one the service reads a submit against), so a new fact needs nothing here.
 * The envelope is typed in full; the schema reads it only as an object, the service checks it later.
 */
type DefinedInputs = { [Type in SubmittedFactType]: FromSchema<(typeof SUBMITTED_FACTS)[Type]['data']> };

export interface FactInputs extends Omit<DefinedInputs, 'EnvelopeRecorded'> {
  EnvelopeRecorded: Omit<DefinedInputs['EnvelopeRecorded'], 'envelope'> & { envelope: ToolEnvelope };
}

/** `StepPlanned` data as submitted; the ledger fills the policy's defaults and stores them. */
export type StepPlannedInput = FactInputs['StepPlanned'];
export type StepPolicyInput = NonNullable<StepPlannedInput['policy']>;
/** `attempt` is the previous attempts plus one; `call_window_ms` bounds the call (docs/contract.md §4.5). */
export type AttemptDispatchedInput = FactInputs['AttemptDispatched'];
export type EnvelopeRecordedInput = FactInputs['EnvelopeRecorded'];
/** `checked_at` is when the lookup ran (evidence only: the ledger judges windows by its own clock). */
export type VerificationRecordedInput = FactInputs['VerificationRecorded'];
/** `input_hash` is the input the grant is for: the state's approval_input_hash (docs/contract.md §4.4). */
export type ApprovalRecordedInput = FactInputs['ApprovalRecorded'];
/** Operator facts (docs/contract.md §4.10): an operator key records them, with its reason. */
export type OutcomeVerifiedManuallyInput = FactInputs['OutcomeVerifiedManually'];
export type StepCancelledInput = FactInputs['StepCancelled'];
export type StepReopenedInput = FactInputs['StepReopened'];
export type EscalationAcknowledgedInput = FactInputs['EscalationAcknowledged'];

/** One operator fact, as `POST /v1/operator-facts` records it on many operations (docs/contract.md §9). */
export type OperatorFactInput = {
  [Type in OperatorFactType]: { type: Type; data: FactInputs[Type] };
}[OperatorFactType];

/** An operation to record an operator fact on; without an `eventId` the client chooses one before the first send. */
export type OperatorFactTarget = string | { operationRef: string; eventId?: string };

/** One operation's outcome, in the order named: the submit route's answer, or its refusal (problem+json). */
export type OperatorFactOutcome =
  | (Omit<Extract<ServerOperatorFactOutcome, { outcome: 'recorded' }>, 'answer'> & { answer: SubmitAnswer })
  | Extract<ServerOperatorFactOutcome, { outcome: 'refused' }>;

export interface OperatorFactsAnswer {
  recorded: number;
  refused: number;
  results: OperatorFactOutcome[];
}

/** One fact to submit. Without an `event_id` the client chooses one before the first send. */
export type SubmittedEventInput = {
  [Type in SubmittedFactType]: { event_id?: string; type: Type; data: FactInputs[Type] };
}[SubmittedFactType];

/** One fact as sent: its id is fixed, so any resend of it is the same fact (and a no-op). */
export type SubmittedEvent = SubmittedEventInput & { event_id: string };

/** One stored event, as the contract defines it once (`EventView`). */
export type StoredEventView = EventView;

/** One page of an operation's events; its state, with `as_of_revision`, typed as the client types a state. */
export interface OperationEvents extends Omit<ServerOperationEvents, 'state'> {
  state?: OperationState;
}

/** One operation a restarted worker must verify: in flight (`dispatched`) or `verifying`. */
export interface RecoveryItem {
  operation_ref: string;
  tool: string;
  run_id: string;
  status: 'dispatched' | 'verifying';
  /** When the step entered this status (ledger clock). */
  since: string;
  /** The attempt in flight or to verify. */
  attempt: number;
  attempts_used?: number;
  side_effect?: SideEffect;
  reason?: string;
  verification_tool?: string;
  revision?: number;
}

export interface RecoveryPage {
  items: RecoveryItem[];
  next_cursor?: string;
  /** The log position the projection had applied when it answered. */
  as_of_position?: number;
}

/** Projections (docs/contract.md §5): their fields are the server's to grow; the client passes them through. */
export interface EvidenceTrail {
  operation_ref: string;
  [field: string]: unknown;
}

export interface RunSummary {
  run_id: string;
  [field: string]: unknown;
}

export interface TrustMetrics {
  [field: string]: unknown;
}

/** The problem+json body of every error answer (RFC 9457 plus the ledger's fields). */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  instance?: string;
  field?: string;
  directive?: Directive;
  state?: OperationState;
  results?: SubmitResult[];
  retry_after_seconds?: number;
}
