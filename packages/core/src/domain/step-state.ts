import { countDispatch, NO_ATTEMPTS } from './attempts';
import type { ToolEnvelope } from './envelope/envelope.types';
import type { JsonValue } from '../shared/json';
import {
  dispatchTimeoutMs,
  type Directive,
  type RecordedEvent,
  type StepPlannedData,
  type StepStatus,
  type VerificationOutcome,
} from './events';

export interface EnvelopeSummary {
  attempt: number;
  ok: boolean;
  code: string;
  category?: string;
  commit_state: string;
  next_action?: string;
}

export interface SuccessRecord {
  attempt: number;
  /** How the success was proven: by the tool's own envelope, a verification lookup, or a person's lookup. */
  proven_by: 'envelope' | 'verification' | 'manual_verification';
  checked_at: string;
  evidence_ref?: string;
  result?: unknown;
}

export interface UnplannedStep {
  status: 'unplanned';
}

export interface PlannedStep {
  status: StepStatus;
  definition: StepPlannedData;
  /** Dispatches the ledger granted. */
  attempts_used: number;
  /** The attempt last granted (0 before the first). */
  current_attempt: number;
  current_input_hash?: string;
  /** The input the attempt last granted was dispatched with, when its dispatcher sent it. */
  current_input?: JsonValue;
  dispatched_at?: string;
  /** The last instant the attempt in flight may reach the provider from its dispatcher's side. */
  call_deadline?: string;
  /** When the current attempt's envelope was recorded: its dispatcher's word that the call is over. */
  call_ended_at?: string;
  /** After correct_input: the input hash that may not run again. */
  blocked_input_hash?: string;
  not_before?: string;
  /** The last retryable envelope's max_attempts_remaining (seed: the lower bound applies). */
  envelope_attempts_remaining?: number;
  consecutive_dependency_failures: number;
  approval: 'not_requested' | 'pending' | 'granted' | 'denied';
  /** Once a step asked for approval, every input it runs needs its own (docs/contract.md §4.4). */
  approval_required?: boolean;
  /** The input hash the pending (or last) approval request is for. */
  approval_input_hash?: string;
  /** That input itself, when the ledger recorded it (the plan's, a dispatch's or a refused dispatch's). */
  approval_input?: JsonValue;
  /** Input hashes an approver granted. */
  approved_input_hashes?: string[];
  /**
   * An outcome that may have reached the provider (a success, an unknown or committed one), reported
   * late by an attempt after a later one was granted (docs/contract.md §4.9).
   */
  possible_duplicate?: { attempt: number; recorded_at: string };
  /**
   * When the attempt last granted reported, late, an outcome that may have reached the provider
   * after it was verified not_found: it reached no later than that (docs/contract.md §4.9).
   */
  late_reach_at?: string;
  last_envelope?: EnvelopeSummary;
  last_verification?: { outcome: VerificationOutcome; checked_at: string; evidence_ref?: string; manual?: true };
  /** The attempt whose outcome a verification (automated or a person's) settled as committed or not. */
  verified_attempt?: number;
  /**
   * After a reopen: the attempts the step may make in all, replacing the plan's max_attempts (the
   * attempts used so far plus the new budget; docs/contract.md §4.10).
   */
  max_attempts?: number;
  /** A person took the escalation (it stays escalated until resolved). Cleared when the step moves. */
  acknowledged?: { assignee: string; note?: string; at: string };
  /** Why a person cancelled the step. */
  cancel_reason?: string;
  success?: SuccessRecord;
  /** The reason code of the last transition. */
  reason: string;
  /** When the current status began (ledger clock). */
  since: string;
  directive: Directive;
}

export type StepState = UnplannedStep | PlannedStep;

export const initialState = (): StepState => ({ status: 'unplanned' });

export function isPlanned(state: StepState): state is PlannedStep {
  return state.status !== 'unplanned';
}

const addMs = (instant: string, ms: number): string => new Date(Date.parse(instant) + ms).toISOString();

/**
 * The last instant the attempt in flight may reach the provider from its dispatcher's side: its
 * call deadline, or earlier, when its envelope came back (docs/contract.md §4.5). A log written
 * before call deadlines existed reads as the dispatch plus the plan's dispatch timeout.
 */
export function lastReachOf(state: PlannedStep): string {
  const dispatchedAt = state.dispatched_at ?? state.since;
  const deadline = state.call_deadline ?? addMs(dispatchedAt, dispatchTimeoutMs(state.definition.policy));
  const reach =
    state.call_ended_at !== undefined && Date.parse(state.call_ended_at) < Date.parse(deadline)
      ? state.call_ended_at
      : deadline;
  // A late report proves the call ran past its deadline, up to the report at most (§4.9).
  if (state.late_reach_at !== undefined && Date.parse(state.late_reach_at) > Date.parse(reach))
    return state.late_reach_at;
  return reach;
}

/**
 * Whether an envelope says its call may have reached the provider: a success, or a failure whose
 * commit state is not `not_committed` (docs/contract.md §4.9).
 */
export function mayHaveReachedProvider(envelope: ToolEnvelope | undefined): boolean {
  if (envelope === undefined || envelope === null || typeof envelope !== 'object') return false;
  return envelope.ok === true || envelope.commit_state !== 'not_committed';
}

/**
 * Whether a late failure of `attempt` that may have reached the provider reopens its outcome
 * (docs/contract.md §4.9): it is the last attempt granted, and a lookup (automated or a person's)
 * found it not_found, so that lookup may have come before the write. The step is then verified
 * again before any new attempt. Shared by the decider and the fold.
 */
export function lateOutcomeReopens(state: PlannedStep, attempt: number, envelope: ToolEnvelope | undefined): boolean {
  return (
    envelope?.ok === false &&
    mayHaveReachedProvider(envelope) &&
    attempt === state.attempts_used &&
    state.success === undefined &&
    state.verified_attempt === attempt &&
    state.last_verification?.outcome === 'not_found'
  );
}

/**
 * Whether a late success of `attempt` settles the step (docs/contract.md §4.9): it is the last
 * attempt granted, nothing is in flight and the step is not terminal, so that write committed and
 * no other may run. Shared by the decider and the fold, so both read a late envelope alike.
 */
export function lateSuccessSettles(state: PlannedStep, attempt: number, ok: boolean): boolean {
  const idle =
    state.status !== 'dispatched' &&
    state.status !== 'succeeded' &&
    state.status !== 'escalated' &&
    state.status !== 'cancelled';
  return ok && idle && attempt === state.attempts_used;
}

/**
 * Whether an attempt's outcome is unknown and unverified: an attempt was granted and neither its
 * envelope nor a verification (automated or a person's) settled whether it committed. While it is,
 * no new attempt may be granted, whatever a person records (docs/contract.md §4.1, §4.10).
 */
export function outcomeUnknown(state: PlannedStep): boolean {
  if (state.attempts_used === 0 || state.success !== undefined) return false;
  if (state.verified_attempt === state.current_attempt) return false;
  const envelope = state.last_envelope;
  if (envelope === undefined || envelope.attempt !== state.current_attempt) return true;
  return envelope.commit_state === 'unknown';
}

/** Whether an approver granted this input (an approval binds to the input it was asked for). */
export function isApproved(state: PlannedStep, inputHash: string): boolean {
  return state.approved_input_hashes?.includes(inputHash) ?? false;
}

/** The input recorded for `inputHash`: the last dispatch's or the plan's, when sent; undefined otherwise. */
export function recordedInputFor(state: PlannedStep, inputHash: string | undefined): JsonValue | undefined {
  if (inputHash === undefined) return undefined;
  if (inputHash === state.current_input_hash && state.current_input !== undefined) return state.current_input;
  return inputHash === state.definition.input_hash ? state.definition.input : undefined;
}

/** The input a new attempt runs unless the runtime corrects it: the one last dispatched, else the plan's. */
export function inputToRunNext(state: PlannedStep): string {
  return state.current_input_hash ?? state.definition.input_hash;
}

/** Approved inputs without `inputHash`: a denial revokes its grant, a new request spends it (§4.4). */
function withoutApproval(state: PlannedStep, inputHash: string | undefined): string[] | undefined {
  if (inputHash === undefined || state.approved_input_hashes === undefined) return state.approved_input_hashes;
  return state.approved_input_hashes.filter((approved) => approved !== inputHash);
}

/**
 * Where a reopened step goes (docs/contract.md §4.10): `needs_input` when its last envelope asked
 * for a corrected input, `awaiting_approval` when it needs an approval and none stands for the input
 * it would run (a denial revoked it, or the provider asked again), `retry_ready` otherwise. Shared
 * by the decider and the fold, so a reopen never restores a spent or revoked approval.
 */
export function reopenedStatus(state: PlannedStep): 'needs_input' | 'awaiting_approval' | 'retry_ready' {
  const last = state.last_envelope;
  if (last !== undefined && last.attempt === state.current_attempt && last.next_action === 'correct_input')
    return 'needs_input';
  if (state.approval_required && !isApproved(state, inputToRunNext(state))) return 'awaiting_approval';
  return 'retry_ready';
}

function summarise(attempt: number, envelope: ToolEnvelope): EnvelopeSummary {
  if (envelope.ok) return { attempt, ok: true, code: 'COMMITTED', commit_state: 'committed' };
  return {
    attempt,
    ok: false,
    code: envelope.code,
    category: envelope.category,
    commit_state: envelope.commit_state,
    next_action: envelope.next_action,
  };
}

/**
 * Folds one recorded event into the state. Total: it never throws, and an event type it does not
 * know (written by a newer ledger) leaves the state as it was, so old readers survive new events.
 * Status changes come only from TransitionRecorded: the decision was made once, by `decide`.
 */
export function evolve(state: StepState, event: RecordedEvent): StepState {
  if (event.type === 'StepPlanned') {
    if (isPlanned(state)) return state;
    return {
      status: 'planned',
      definition: event.data,
      ...NO_ATTEMPTS,
      consecutive_dependency_failures: 0,
      approval: 'not_requested',
      reason: 'STEP_PLANNED',
      since: event.recorded_at,
      directive: { next_action: 'dispatch', attempts_remaining: event.data.policy?.max_attempts ?? 0 },
    };
  }
  if (!isPlanned(state)) return state;
  switch (event.type) {
    case 'AttemptDispatched':
      return {
        ...state,
        ...countDispatch(state, event.data.attempt),
        current_input_hash: event.data.input_hash,
        // A retry of the same input that does not send it again keeps the one recorded for it.
        current_input:
          event.data.input ?? (event.data.input_hash === state.current_input_hash ? state.current_input : undefined),
        dispatched_at: event.recorded_at,
        call_deadline: event.data.call_deadline,
        call_ended_at: undefined,
        late_reach_at: undefined,
        not_before: undefined,
        // The attempt the envelope allowed is used up by this dispatch (the lower bound applies).
        envelope_attempts_remaining:
          state.envelope_attempts_remaining === undefined
            ? undefined
            : Math.max(0, state.envelope_attempts_remaining - 1),
        approval: state.approval === 'granted' ? 'not_requested' : state.approval,
      };
    case 'EnvelopeRecorded': {
      const { envelope, attempt } = event.data;
      if (!envelope || typeof envelope !== 'object') return state;
      if (envelope.ok) {
        return {
          ...state,
          call_ended_at: event.recorded_at,
          last_envelope: summarise(attempt, envelope),
          consecutive_dependency_failures: 0,
          success: {
            attempt,
            proven_by: 'envelope',
            checked_at: envelope.verification?.checked_at,
            evidence_ref: envelope.verification?.evidence_ref,
            result: envelope.result,
          },
        };
      }
      const retryable = envelope.next_action === 'correct_input' || envelope.next_action === 'wait_and_retry';
      const asksApproval = envelope.next_action === 'request_approval';
      return {
        ...state,
        call_ended_at: event.recorded_at,
        ...(asksApproval
          ? {
              approval_required: true,
              approval_input_hash: state.current_input_hash,
              approval_input: recordedInputFor(state, state.current_input_hash),
              // The provider asks again: an earlier grant of this input is spent (§4.4).
              approved_input_hashes: withoutApproval(state, state.current_input_hash),
            }
          : {}),
        last_envelope: summarise(attempt, envelope),
        consecutive_dependency_failures:
          envelope.category === 'dependency' ? state.consecutive_dependency_failures + 1 : 0,
        blocked_input_hash:
          envelope.next_action === 'correct_input' ? state.current_input_hash : state.blocked_input_hash,
        not_before: envelope.next_action === 'wait_and_retry' ? envelope.retry?.not_before : undefined,
        envelope_attempts_remaining: retryable
          ? envelope.retry?.max_attempts_remaining
          : state.envelope_attempts_remaining,
        approval: envelope.next_action === 'request_approval' ? 'pending' : state.approval,
      };
    }
    case 'VerificationRecorded': {
      const { outcome, checked_at, evidence_ref, result } = event.data;
      const next: PlannedStep = { ...state, last_verification: { outcome, checked_at, evidence_ref } };
      if (outcome !== 'lookup_unavailable') next.verified_attempt = state.current_attempt;
      if (outcome === 'found_committed') {
        next.success = { attempt: state.current_attempt, proven_by: 'verification', checked_at, evidence_ref, result };
      }
      return next;
    }
    case 'ApprovalRecorded': {
      const approved = event.data.input_hash ?? state.approval_input_hash;
      if (event.data.decision !== 'granted')
        // A denial revokes every earlier grant of the same input (§4.4).
        return { ...state, approval: 'denied', approved_input_hashes: withoutApproval(state, approved) };
      if (approved === undefined) return { ...state, approval: 'granted' };
      return {
        ...state,
        approval: 'granted',
        approved_input_hashes: [...(state.approved_input_hashes ?? []), approved],
      };
    }
    case 'OutcomeVerifiedManually': {
      const { outcome, evidence_ref } = event.data;
      const next: PlannedStep = {
        ...state,
        verified_attempt: state.current_attempt,
        last_verification: { outcome, checked_at: event.recorded_at, evidence_ref, manual: true },
      };
      if (outcome === 'found_committed') {
        next.success = {
          attempt: state.current_attempt,
          proven_by: 'manual_verification',
          checked_at: event.recorded_at,
          evidence_ref,
        };
      }
      return next;
    }
    case 'StepCancelled':
      return { ...state, cancel_reason: event.data.reason };
    case 'StepReopened':
      // A new budget from here: earlier bounds (the envelope's, the failure streak, a wait) are spent.
      return {
        ...state,
        ...(reopenedStatus(state) === 'awaiting_approval'
          ? {
              approval: 'pending' as const,
              approval_input_hash: inputToRunNext(state),
              approval_input: recordedInputFor(state, inputToRunNext(state)),
            }
          : {}),
        max_attempts: state.attempts_used + event.data.attempts,
        envelope_attempts_remaining: undefined,
        consecutive_dependency_failures: 0,
        not_before: undefined,
      };
    case 'EscalationAcknowledged':
      return {
        ...state,
        acknowledged: { assignee: event.data.assignee, note: event.data.note, at: event.recorded_at },
      };
    case 'TransitionRecorded':
      return {
        ...state,
        acknowledged: undefined,
        status: event.data.to,
        reason: event.data.reason,
        since: event.recorded_at,
        directive: event.data.directive,
      };
    case 'DispatchRefused':
      // A dispatch of an input no approver granted asks approval for that input (docs/contract.md §4.4).
      if (event.data.code === 'APPROVAL_REQUIRED' && state.status !== 'awaiting_approval') {
        return {
          ...state,
          approval: 'pending',
          approval_input_hash: event.data.input_hash,
          approval_input: event.data.input ?? recordedInputFor(state, event.data.input_hash),
        };
      }
      return state;
    case 'LateOutcomeRecorded': {
      const { attempt, envelope, possible_duplicate } = event.data;
      if (possible_duplicate) return { ...state, possible_duplicate: { attempt, recorded_at: event.recorded_at } };
      if (lateOutcomeReopens(state, attempt, envelope)) {
        // The not_found may have come before this write: the outcome is unknown again (§4.9).
        return { ...state, verified_attempt: undefined, late_reach_at: event.recorded_at };
      }
      if (!envelope?.ok || !lateSuccessSettles(state, attempt, true)) return state;
      const proof = envelope.verification;
      return {
        ...state,
        success: {
          attempt,
          proven_by: 'envelope',
          checked_at: proof?.checked_at,
          evidence_ref: proof?.evidence_ref,
          result: envelope.result,
        },
      };
    }
    default:
      return state;
  }
}

/**
 * The version of this fold (`evolve` and the StepState it builds). A state folded and kept beside
 * the log (a snapshot, src/ledger/sealed-streams.ts) is used only by a reader of the same version:
 * change it whenever `evolve` folds any event differently or StepState changes shape, and every
 * kept snapshot is refolded from the log instead of trusted.
 */
export const FOLD_VERSION = 'step-state/1';

export function fold(events: readonly RecordedEvent[], from: StepState = initialState()): StepState {
  let state = from;
  for (const event of events) state = evolve(state, event);
  return state;
}
