/** The HTTP contract's shapes (docs/contract.md §9), shared by the server and the runtime client. */
import type { Directive, OperatorFactType, StepPolicy, SubmittedFactType } from '../domain/events';
import type { JsonObject, JsonValue } from '../shared/json';

/** A fact as the runtime submits it, its shape checked by the HTTP layer; `data` is checked here. */
export interface SubmittedEvent {
  event_id: string;
  type: SubmittedFactType;
  data: JsonObject;
}

export interface SubmitRequest {
  expected_revision?: number;
  events: SubmittedEvent[];
}

export interface SubmitContext {
  tenant: string;
  actor: string;
  operationRef: string;
  traceparent?: string;
  tracestate?: string;
  /** The work-feed lease the fact was submitted under, as the ledger resolved it (stored as evidence). */
  lease?: LeaseEvidence;
  /**
   * When that lease ends (ledger clock), while it still holds the item: a dispatch under it may not
   * reach the provider after it (docs/contract.md §4.5). Not stored: the dispatch's call deadline is.
   */
  leaseExpiresAt?: string;
}

/** One submit as the ledger takes it: who, on which operation, under which lease, and the facts. */
export interface SubmitCommand {
  context: SubmitContext;
  request: SubmitRequest;
}

export interface LeaseEvidence {
  lease_id: string;
  holder: string;
  current: boolean;
  took_over_from?: string;
}

export interface StepView {
  operation_ref: string;
  status: string;
  revision: number;
  run_id?: string;
  tool?: string;
  side_effect?: string;
  policy?: unknown;
  attempts_used: number;
  current_attempt: number;
  attempts_remaining: number;
  not_before?: string;
  approval?: string;
  reason?: string;
  since?: string;
  /** While dispatched: the last instant the attempt may reach the provider (docs/contract.md §4.5). */
  call_deadline?: string;
  /** The input hash the pending (or last) approval request is for (docs/contract.md §4.4). */
  approval_input_hash?: string;
  /**
   * The input that approval binds, labelled with its hash: `recorded` false when the ledger was sent
   * only the hash (the plan or the dispatch carried no input), so an approver is told so plainly.
   */
  approval_input?: { input_hash: string; recorded: boolean; input?: unknown };
  last_envelope?: unknown;
  last_verification?: unknown;
  success?: unknown;
  /** A late outcome that may have reached the provider after a later attempt was granted: the provider may hold two writes (§4.9). */
  possible_duplicate?: { attempt: number; recorded_at: string };
  /** An operator took the escalation (docs/contract.md §4.10). */
  acknowledged?: { assignee: string; note?: string; at: string };
  /** Why an operator cancelled the step. */
  cancel_reason?: string;
}

/**
 * One stored event on the wire (docs/contract.md §6): how `GET /v1/operations/{ref}/events` answers
 * it, the client types it and the CLI's timeline reads it, whether from that route or the store.
 */
export interface EventView {
  revision: number;
  position: number;
  event_id: string;
  type: string;
  recorded_at: string;
  actor: string;
  causation_event_id?: string;
  traceparent?: string;
  schema_version: number;
  data: JsonObject;
  prev_hash: string;
  hash: string;
}

/** One page of an operation's events (docs/contract.md §9); `next_cursor` while more follow. */
export interface OperationEvents {
  operation_ref: string;
  revision: number;
  events: EventView[];
  /** Present while more events follow this page: pass it as `cursor`. */
  next_cursor?: string;
  /** With `as_of_revision`: the state folded up to that revision. */
  as_of_revision?: number;
  state?: StepView;
}

/** `duplicate`: the fact was already recorded (resubmitted under its event id, or a plan repeated as it was). */
export const SUBMIT_RESULT_STATUSES = ['appended', 'duplicate'] as const;

export interface SubmitResult {
  event_id: string;
  status: (typeof SUBMIT_RESULT_STATUSES)[number];
}

export interface SubmitAnswer {
  revision: number;
  position: number;
  state: StepView;
  directive: Directive;
  results: SubmitResult[];
  /** A dispatch on a succeeded step: the original success, replayed. */
  replayed?: true;
  success?: unknown;
  /**
   * The facts came under a work-feed lease (`Ledger-Lease`) and ended the step: the ledger gave
   * the lease back in the same request, so the worker need not (docs/contract.md §9).
   */
  lease_released?: true;
}

// ---- the work feed ------------------------------------------------------------------------------

export interface WorkLease {
  id: string;
  holder: string;
  expires_at: string;
}

export interface WorkItem {
  operation_ref: string;
  run_id: string;
  tool: string;
  side_effect: string;
  /** dispatch: ask the gate for `attempt` and call the tool; verify: look the operation_ref up. */
  kind: 'dispatch' | 'verify';
  status: string;
  directive: Directive;
  /** The attempt to dispatch, or the attempt in flight to verify. */
  attempt: number;
  input_hash: string;
  /** The input the step was planned with, when it carried one and it is the input to run. */
  input?: JsonValue;
  verification_tool?: string;
  policy: StepPolicy;
  /** The stream revision the item was judged on. */
  revision: number;
  /** When it became due (ledger clock). */
  due_at: string;
  lease: WorkLease & { took_over_from?: string };
}

/** Who holds an operation now (GET /v1/operations/{ref}/lease); the lease id stays with its holder. */
export interface LeaseView {
  held: boolean;
  holder?: string;
  expires_at?: string;
  took_over_from?: string;
}

export interface WorkAnswer {
  items: WorkItem[];
}

/** `POST /v1/operator-facts`: one operator fact (docs/contract.md §4.10) for each operation named. */
export interface OperatorFactsRequest {
  fact: { type: OperatorFactType; data: JsonObject };
  operations: Array<{ operation_ref: string; event_id: string }>;
}

/** The problem+json body (RFC 9457) of one operation's refusal, as the single route would answer it. */
export interface OperationProblem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  field?: string;
  directive?: Directive;
  state?: unknown;
  retry_after_seconds?: number;
}

/**
 * One operation's outcome, in the order the request named them: the single route's answer when the
 * fact was recorded (or had been, under the same event id), its refusal otherwise. `operation_ref`
 * is left out only when the refusal is that it looks like a credential (never echoed).
 */
export type OperatorFactOutcome =
  | { operation_ref: string; event_id: string; outcome: 'recorded'; answer: SubmitAnswer }
  | { operation_ref?: string; event_id: string; outcome: 'refused'; problem: OperationProblem };

export interface OperatorFactsAnswer {
  /** How many operations have the fact recorded, and how many refused it. */
  recorded: number;
  refused: number;
  results: OperatorFactOutcome[];
}
