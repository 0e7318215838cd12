import type { ToolError } from './envelope/envelope.types';
import {
  dispatchTimeoutMs,
  type AttemptDispatchedData,
  type Directive,
  type LedgerEvent,
  type RecordedEvent,
  type StepPlannedData,
  type StepStatus,
  type SubmittedFact,
  type TransitionRecordedData,
} from './events';
import {
  evolve,
  isApproved,
  isPlanned,
  lastReachOf,
  lateOutcomeReopens,
  lateSuccessSettles,
  mayHaveReachedProvider,
  outcomeUnknown,
  reopenedStatus,
  type PlannedStep,
  type StepState,
} from './step-state';

/** Stable codes for the refusals `decide` makes; each is in the error registry with its status. */
export type RefusalCode =
  | 'ATTEMPT_IN_FLIGHT'
  | 'VERIFY_BEFORE_RETRY'
  | 'UNCHANGED_RETRY'
  | 'RETRY_NOT_BEFORE'
  | 'APPROVAL_REQUIRED'
  | 'ATTEMPTS_EXHAUSTED'
  | 'STEP_ESCALATED'
  | 'VERIFICATION_PREMATURE'
  | 'OPERATION_REF_REUSED'
  | 'STEP_NOT_PLANNED'
  | 'ATTEMPT_MISMATCH'
  | 'FACT_NOT_EXPECTED'
  | 'STEP_CANCELLED'
  | 'STEP_SUCCEEDED'
  | 'STEP_NOT_ESCALATED'
  | 'OUTCOME_UNVERIFIED'
  | 'OUTCOME_KNOWN'
  | 'CLOCK_SKEW_UNBOUNDED'
  | 'ESCALATION_ALREADY_ACKNOWLEDGED';

/**
 * How the clock that judges a window stands against the clocks that may have started it: other
 * service instances sharing the store (docs/contract.md §4, "Time"). A window started on a clock
 * behind `now` by δ looks δ shorter than it is, so it closes only `margin_ms` (at least δ) after `now`
 * passed its end. `unbounded`: δ has no known bound now (instances' clocks differ beyond the bound,
 * or are not yet compared), and no decision that needs a window to have closed is taken.
 */
export type WindowClock = { margin_ms: number } | { unbounded: 'skew' | 'unjudged' };

export interface Command {
  fact: SubmittedFact;
  event_id: string;
  /** The ledger's clock: times are never the client's. */
  now: string;
  /**
   * When the work-feed lease the fact was submitted under ends (ledger clock), while it still holds
   * the item: a dispatch under it may not reach the provider after it (docs/contract.md §4.5).
   */
  lease_expires_at?: string;
  /** Absent: no other clock can have started a window (one instance), margin 0. */
  window_clock?: WindowClock;
}

/**
 * Every decision carries `state`: the state its `events` leave, each event folded once here, so the
 * caller appends and answers without folding them again.
 */
export type Decision =
  /** Append `events` (the fact first, then what it causes). Empty: an idempotent no-op. */
  | { kind: 'accepted'; events: LedgerEvent[]; state: StepState }
  /** Refused. `events` is what records the refusal (a refused dispatch), possibly none. */
  | {
      kind: 'refused';
      code: RefusalCode;
      detail: string;
      directive: Directive;
      events: LedgerEvent[];
      state: StepState;
    }
  /** A dispatch on a succeeded step: the original success stands, the duplicate is recorded. */
  | { kind: 'replayed'; events: LedgerEvent[]; state: StepState };

export type Refused = Extract<Decision, { kind: 'refused' }>;

/** Reason codes of transitions that are not refusal codes or envelope codes. */
export const TRANSITION_REASONS = {
  planned: 'STEP_PLANNED',
  dispatched: 'ATTEMPT_DISPATCHED',
  committed: 'COMMITTED',
  verifiedCommitted: 'VERIFIED_COMMITTED',
  verifiedNotFound: 'VERIFIED_NOT_FOUND',
  lookupUnavailable: 'LOOKUP_UNAVAILABLE',
  approvalGranted: 'APPROVAL_GRANTED',
  approvalDenied: 'APPROVAL_DENIED',
  attemptsExhausted: 'ATTEMPTS_EXHAUSTED',
  dependencyFailuresExhausted: 'DEPENDENCY_FAILURES_EXHAUSTED',
  inputNotApproved: 'INPUT_NOT_APPROVED',
  lateSuccess: 'LATE_SUCCESS',
  lateOutcomeUnknown: 'LATE_OUTCOME_UNKNOWN',
  manuallyVerifiedCommitted: 'MANUALLY_VERIFIED_COMMITTED',
  manuallyVerifiedNotFound: 'MANUALLY_VERIFIED_NOT_FOUND',
  cancelled: 'STEP_CANCELLED',
  reopened: 'STEP_REOPENED',
} as const;

/** Escalations caused by a bound: a later dispatch is refused as ATTEMPTS_EXHAUSTED, not STEP_ESCALATED. */
const BOUND_REASONS: readonly string[] = [
  TRANSITION_REASONS.attemptsExhausted,
  TRANSITION_REASONS.dependencyFailuresExhausted,
];

const addMs = (instant: string, ms: number): string => new Date(Date.parse(instant) + ms).toISOString();
const isBefore = (a: string, b: string): boolean => Date.parse(a) < Date.parse(b);

/**
 * A window that ends at `end` by the clock that started it, judged at `command.now`: `open` until
 * `closes` (its end plus the margin, on this clock); `unbounded` when it has passed by this clock
 * but the clocks cannot be compared, so it may still be open by the one that started it.
 */
function judgeWindow(command: Command, end: string): { open: string } | 'closed' | 'unbounded' {
  const clock = command.window_clock ?? { margin_ms: 0 };
  const closes = 'margin_ms' in clock ? addMs(end, clock.margin_ms) : end;
  if (isBefore(command.now, closes)) return { open: closes };
  return 'margin_ms' in clock ? 'closed' : 'unbounded';
}

/** No decision that needs a window to have closed while the instances' clocks cannot be compared. */
function refuseUnboundedClock(state: PlannedStep, command: Command, what: string): Decision {
  const reason =
    command.window_clock && 'unbounded' in command.window_clock && command.window_clock.unbounded === 'unjudged'
      ? 'are not compared yet'
      : 'differ beyond the bound';
  return refuse(
    state,
    command,
    'CLOCK_SKEW_UNBOUNDED',
    `${what}: the clocks of the instances sharing this store ${reason}, so whether its window has closed cannot be judged`,
    state.directive,
  );
}

/**
 * Attempts left under the lower of the step's policy and the last retryable envelope's
 * max_attempts_remaining (docs/contract.md §4.6). An unknown outcome's envelope says 0 automatic retries, but
 * a verified not_found allows one new attempt, so only correct_input / wait_and_retry bound it.
 */
export function attemptsRemaining(state: PlannedStep): number {
  const maxAttempts = state.max_attempts ?? state.definition.policy.max_attempts;
  const byPolicy = Math.max(0, maxAttempts - state.attempts_used);
  const byEnvelope = state.envelope_attempts_remaining;
  return byEnvelope === undefined ? byPolicy : Math.min(byPolicy, byEnvelope);
}

export function directiveFor(status: StepStatus, state: PlannedStep): Directive {
  const attempts_remaining = attemptsRemaining(state);
  switch (status) {
    case 'planned':
    case 'retry_ready':
      return { next_action: 'dispatch', attempts_remaining };
    case 'dispatched':
      return { next_action: 'await_outcome', attempts_remaining };
    case 'needs_input':
      return { next_action: 'correct_input', attempts_remaining };
    case 'retry_scheduled':
      return { next_action: 'wait_and_retry', not_before: state.not_before, attempts_remaining };
    case 'verifying':
      return { next_action: 'verify_operation', attempts_remaining };
    case 'awaiting_approval':
      return { next_action: 'request_approval', attempts_remaining };
    case 'succeeded':
    case 'escalated':
    case 'cancelled':
      return { next_action: 'none', attempts_remaining: 0 };
  }
}

function transition(
  before: StepState,
  after: PlannedStep,
  to: StepStatus,
  reason: string,
  causedBy: string,
): LedgerEvent {
  const data: TransitionRecordedData = {
    from: before.status,
    to,
    reason,
    caused_by: causedBy,
    directive: directiveFor(to, after),
  };
  if (isPlanned(before)) data.from_since = before.since;
  return { type: 'TransitionRecorded', data };
}

/**
 * The state the fact leaves behind, folded by the one `evolve`, so a transition's directive is
 * computed on it and what each fact does to the state is defined once.
 */
function applyFact(state: StepState, command: Command): PlannedStep {
  return evolve(state, recordedAt(command, command.fact)) as PlannedStep;
}

/**
 * An event as `evolve` reads it when it is recorded at `now`. `evolve` reads what happened and
 * when, never the event's id, so the events a fact causes are folded under the fact's id (the
 * ledger gives them ids derived from it when it stores them).
 */
function recordedAt(command: Command, event: LedgerEvent): RecordedEvent {
  return { ...event, event_id: command.event_id, recorded_at: command.now };
}

/** The fact (already folded into `after`) and what it caused, folded once into the state they leave. */
function accept(after: PlannedStep, command: Command, caused: LedgerEvent): Decision {
  return { kind: 'accepted', events: [command.fact, caused], state: evolve(after, recordedAt(command, caused)) };
}

function sameDefinition(a: StepPlannedData, b: StepPlannedData): boolean {
  const policyA = a.policy;
  const policyB = b.policy;
  return (
    a.run_id === b.run_id &&
    a.tool === b.tool &&
    a.side_effect === b.side_effect &&
    a.input_hash === b.input_hash &&
    policyA.max_attempts === policyB.max_attempts &&
    policyA.consistency_window_ms === policyB.consistency_window_ms &&
    policyA.verification_tool === policyB.verification_tool &&
    policyA.max_consecutive_dependency_failures === policyB.max_consecutive_dependency_failures &&
    dispatchTimeoutMs(policyA) === dispatchTimeoutMs(policyB)
  );
}

/** A refusal, with the state the events recording it leave (a refused dispatch may escalate the step). */
function refuse(
  state: StepState,
  command: Command,
  code: RefusalCode,
  detail: string,
  directive: Directive,
  events: LedgerEvent[] = [],
): Decision {
  const after = events.reduce((folded, event) => evolve(folded, recordedAt(command, event)), state);
  return { kind: 'refused', code, detail, directive, events, state: after };
}

/** Moves to `to`, unless a bound leaves no attempt for a state that waits for another one. */
function moveOrEscalate(
  before: StepState,
  after: PlannedStep,
  to: StepStatus,
  reason: string,
  causedBy: string,
): LedgerEvent {
  const waitsForAttempt = to === 'needs_input' || to === 'retry_scheduled' || to === 'retry_ready';
  if (waitsForAttempt && attemptsRemaining(after) === 0) {
    return transition(before, after, 'escalated', TRANSITION_REASONS.attemptsExhausted, causedBy);
  }
  const failures = after.consecutive_dependency_failures;
  if (waitsForAttempt && failures >= after.definition.policy.max_consecutive_dependency_failures) {
    return transition(before, after, 'escalated', TRANSITION_REASONS.dependencyFailuresExhausted, causedBy);
  }
  return transition(before, after, to, reason, causedBy);
}

function decideDispatch(state: PlannedStep, command: Command, attempt: number, inputHash: string): Decision {
  const refusal = (code: RefusalCode, detail: string, escalate = false): Decision => {
    const events: LedgerEvent[] = [{ type: 'DispatchRefused', data: { attempt, input_hash: inputHash, code } }];
    if (escalate) {
      const escalated: PlannedStep = { ...state };
      events.push(transition(state, escalated, 'escalated', TRANSITION_REASONS.attemptsExhausted, command.event_id));
      return refuse(state, command, code, detail, directiveFor('escalated', escalated), events);
    }
    return refuse(state, command, code, detail, state.directive, events);
  };
  switch (state.status) {
    case 'succeeded': {
      const duplicate: LedgerEvent = {
        type: 'DispatchRefused',
        data: {
          attempt,
          input_hash: inputHash,
          code: 'DUPLICATE_PREVENTED',
          replayed_attempt: state.success?.attempt ?? state.current_attempt,
        },
      };
      return { kind: 'replayed', events: [duplicate], state: evolve(state, recordedAt(command, duplicate)) };
    }
    case 'cancelled':
      return refusal('STEP_CANCELLED', `the step was cancelled (${state.cancel_reason ?? 'no reason given'})`);
    case 'escalated':
      return BOUND_REASONS.includes(state.reason)
        ? refusal('ATTEMPTS_EXHAUSTED', 'the step escalated when its attempts ran out')
        : refusal('STEP_ESCALATED', `the step is escalated (${state.reason})`);
    case 'dispatched':
      // Recomputed, not the stored directive: a log written before await_outcome says `dispatch` there.
      return refuse(
        state,
        command,
        'ATTEMPT_IN_FLIGHT',
        `attempt ${state.current_attempt} has no recorded outcome`,
        directiveFor('dispatched', state),
        [{ type: 'DispatchRefused', data: { attempt, input_hash: inputHash, code: 'ATTEMPT_IN_FLIGHT' } }],
      );
    case 'verifying':
      return refusal('VERIFY_BEFORE_RETRY', 'the outcome of the last write is unknown: verify it first');
    case 'awaiting_approval':
      return refusal('APPROVAL_REQUIRED', 'the step waits for an approval');
    case 'needs_input':
      if (inputHash === state.blocked_input_hash) {
        return refusal('UNCHANGED_RETRY', 'the input that needed correcting has not changed');
      }
      break;
    case 'retry_scheduled':
      if (state.not_before !== undefined) {
        // The provider's wait, not a duplicate's window: judged on this clock, not widened (docs/reliability.md).
        if (isBefore(command.now, state.not_before))
          return refusal('RETRY_NOT_BEFORE', `no attempt may run before ${state.not_before}`);
        if (judgeWindow(command, state.not_before) === 'unbounded')
          return refuseUnboundedClock(state, command, `attempt ${attempt} after not_before`);
      }
      break;
    case 'planned':
    case 'retry_ready':
      break;
  }
  if (attemptsRemaining(state) === 0) {
    return refusal('ATTEMPTS_EXHAUSTED', 'no attempt remains under the step policy', true);
  }
  if (attempt !== state.attempts_used + 1) {
    return refusal('ATTEMPT_MISMATCH', `the next attempt is ${state.attempts_used + 1}, not ${attempt}`);
  }
  if (state.approval_required && !isApproved(state, inputHash)) {
    // An approval binds to the input it was asked for: another input asks for its own (§4.4), and the
    // refusal keeps that input when the dispatcher sent it, so the approver reads what they approve.
    const { input } = command.fact.data as AttemptDispatchedData;
    const refused: LedgerEvent = {
      type: 'DispatchRefused',
      data: { attempt, input_hash: inputHash, code: 'APPROVAL_REQUIRED', ...(input === undefined ? {} : { input }) },
    };
    const asking = evolve(state, recordedAt(command, refused)) as PlannedStep;
    const events = [
      refused,
      transition(state, asking, 'awaiting_approval', TRANSITION_REASONS.inputNotApproved, command.event_id),
    ];
    return refuse(
      state,
      command,
      'APPROVAL_REQUIRED',
      'no approval was granted for this input; it waits for its own',
      directiveFor('awaiting_approval', asking),
      events,
    );
  }
  const granted: Command = { ...command, fact: { type: 'AttemptDispatched', data: grantedDispatch(state, command) } };
  const after = applyFact(state, granted);
  return accept(
    after,
    granted,
    transition(state, after, 'dispatched', TRANSITION_REASONS.dispatched, command.event_id),
  );
}

/**
 * The dispatch as stored: with its call deadline, the last instant it may reach the provider from
 * the dispatcher's side. The smallest of the window the dispatcher declared, the plan's dispatch
 * timeout (after which the work feed takes a silent dispatcher for dead) and the lease it was
 * submitted under (docs/contract.md §4.5).
 */
function grantedDispatch(state: PlannedStep, command: Command): AttemptDispatchedData {
  const data = command.fact.data as AttemptDispatchedData;
  const nowMs = Date.parse(command.now);
  const limits = [dispatchTimeoutMs(state.definition.policy)];
  if (data.call_window_ms !== undefined) limits.push(data.call_window_ms);
  if (command.lease_expires_at !== undefined) limits.push(Math.max(0, Date.parse(command.lease_expires_at) - nowMs));
  const { call_deadline: _ignored, ...submitted } = data;
  return { ...submitted, call_deadline: new Date(nowMs + Math.min(...limits)).toISOString() };
}

function decideEnvelope(state: PlannedStep, command: Command & { fact: { type: 'EnvelopeRecorded' } }): Decision {
  const { attempt, envelope } = command.fact.data;
  if (state.status !== 'dispatched' || attempt !== state.current_attempt) {
    const inFlight = state.status === 'dispatched' ? `attempt ${state.current_attempt}` : 'no attempt';
    const detail = `envelope for attempt ${attempt}, but ${inFlight} is in flight`;
    if (attempt < 1 || attempt > state.attempts_used)
      return refuse(state, command, 'ATTEMPT_MISMATCH', detail, state.directive);
    return decideLateOutcome(state, { ...command, fact: command.fact }, detail);
  }
  const after = applyFact(state, command);
  const cause = command.event_id;
  if (envelope.ok)
    return accept(after, command, transition(state, after, 'succeeded', TRANSITION_REASONS.committed, cause));
  return accept(after, command, envelopeTransition(state, after, envelope, cause));
}

/**
 * An envelope of an attempt the ledger granted but no longer has in flight (its dispatcher was
 * paused, partitioned or slow). What that attempt did is evidence, so it is recorded
 * (docs/contract.md §4.9):
 * - a success of the last attempt granted, on a step that is not terminal and has nothing in
 *   flight: that write committed, so the step succeeds and nothing is dispatched again;
 * - an outcome that may have reached the provider (a success, an unknown or committed failure) of
 *   an attempt after a later one was granted: a possible duplicate, for a person to look up;
 * - such a failure of the last attempt granted, after a lookup found it not_found: that lookup may
 *   have come before the write, so the outcome is unknown again and a step waiting to retry goes
 *   back to `verifying`;
 * - anything else: recorded, refused as ATTEMPT_MISMATCH.
 */
function decideLateOutcome(
  state: PlannedStep,
  command: Command & { fact: { type: 'EnvelopeRecorded' } },
  detail: string,
): Decision {
  const { attempt, envelope, redactions } = command.fact.data;
  const laterGranted = attempt < state.attempts_used;
  const late: LedgerEvent = {
    type: 'LateOutcomeRecorded',
    data: { attempt, envelope, redactions, possible_duplicate: laterGranted && mayHaveReachedProvider(envelope) },
  };
  const after = evolve(state, recordedAt(command, late)) as PlannedStep;
  if (lateSuccessSettles(state, attempt, envelope.ok)) {
    const moved = transition(state, after, 'succeeded', TRANSITION_REASONS.lateSuccess, command.event_id);
    return { kind: 'accepted', events: [late, moved], state: evolve(after, recordedAt(command, moved)) };
  }
  if (state.status === 'retry_ready' && lateOutcomeReopens(state, attempt, envelope)) {
    const moved = transition(state, after, 'verifying', TRANSITION_REASONS.lateOutcomeUnknown, command.event_id);
    return { kind: 'accepted', events: [late, moved], state: evolve(after, recordedAt(command, moved)) };
  }
  return refuse(state, command, 'ATTEMPT_MISMATCH', detail, state.directive, [late]);
}

function envelopeTransition(state: PlannedStep, after: PlannedStep, envelope: ToolError, cause: string): LedgerEvent {
  switch (envelope.next_action) {
    case 'verify_operation':
      return transition(state, after, 'verifying', envelope.code, cause);
    case 'correct_input':
      return moveOrEscalate(state, after, 'needs_input', envelope.code, cause);
    case 'wait_and_retry':
      return moveOrEscalate(state, after, 'retry_scheduled', envelope.code, cause);
    case 'request_approval':
      return transition(state, after, 'awaiting_approval', envelope.code, cause);
    case 'escalate':
      return transition(state, after, 'escalated', envelope.code, cause);
    default: {
      const unhandled: never = envelope.next_action;
      throw new Error(`unhandled next_action ${String(unhandled)}`);
    }
  }
}

function decideVerification(
  state: PlannedStep,
  command: Command & { fact: { type: 'VerificationRecorded' } },
): Decision {
  // A restarted worker verifies what was in flight: no envelope may ever have come back (docs/contract.md §4).
  if (state.status !== 'verifying' && state.status !== 'dispatched') {
    return refuse(
      state,
      command,
      'FACT_NOT_EXPECTED',
      `no verification is pending in state ${state.status}`,
      state.directive,
    );
  }
  const { outcome } = command.fact.data;
  const cause = command.event_id;
  if (outcome === 'not_found') {
    const premature = refuseInconclusiveNotFound(state, command);
    if (premature) return premature;
  }
  const after = applyFact(state, command);
  switch (outcome) {
    case 'found_committed':
      return accept(after, command, transition(state, after, 'succeeded', TRANSITION_REASONS.verifiedCommitted, cause));
    case 'not_found':
      return accept(
        after,
        command,
        moveOrEscalate(state, after, 'retry_ready', TRANSITION_REASONS.verifiedNotFound, cause),
      );
    case 'lookup_unavailable':
      // Never guess: an unverifiable write goes to a person (seed: "escalate rather than guessing").
      return accept(after, command, transition(state, after, 'escalated', TRANSITION_REASONS.lookupUnavailable, cause));
    default: {
      const unhandled: never = outcome;
      throw new Error(`unhandled verification outcome ${String(unhandled)}`);
    }
  }
}

function decideApproval(state: PlannedStep, command: Command & { fact: { type: 'ApprovalRecorded' } }): Decision {
  if (state.status !== 'awaiting_approval') {
    return refuse(
      state,
      command,
      'FACT_NOT_EXPECTED',
      `no approval is pending in state ${state.status}`,
      state.directive,
    );
  }
  const asked = state.approval_input_hash;
  const named = command.fact.data.input_hash;
  if (named !== undefined && asked !== undefined && named !== asked) {
    return refuse(
      state,
      command,
      'FACT_NOT_EXPECTED',
      `the approval pending is for input ${asked}, not ${named}`,
      state.directive,
    );
  }
  // The approval records the input it is for, named or not (§4.4).
  const bound: Command =
    asked === undefined
      ? command
      : { ...command, fact: { type: 'ApprovalRecorded', data: { ...command.fact.data, input_hash: asked } } };
  const after = applyFact(state, bound);
  const cause = command.event_id;
  const next =
    command.fact.data.decision === 'granted'
      ? moveOrEscalate(state, after, 'retry_ready', TRANSITION_REASONS.approvalGranted, cause)
      : transition(state, after, 'escalated', TRANSITION_REASONS.approvalDenied, cause);
  return accept(after, bound, next);
}

/**
 * What an operator fact may never act on: a succeeded or cancelled step (docs/contract.md §4.10).
 * The code names the state, so a console or a script can say why without parsing the detail.
 */
function refuseTerminal(state: PlannedStep, command: Command): Decision | undefined {
  if (state.status === 'succeeded')
    return refuse(
      state,
      command,
      'STEP_SUCCEEDED',
      `${command.fact.type}: the step already succeeded`,
      state.directive,
    );
  if (state.status === 'cancelled')
    return refuse(state, command, 'STEP_CANCELLED', `${command.fact.type}: the step was cancelled`, state.directive);
  return undefined;
}

/**
 * A person's lookup settles an unknown outcome as an automated one would (§4.5), under the same
 * timing: a dispatch still inside its dispatch timeout may be running, and a `not_found` is
 * conclusive only a consistency window after the attempt's last reach.
 */
function decideManualVerification(
  state: PlannedStep,
  command: Command & { fact: { type: 'OutcomeVerifiedManually' } },
): Decision {
  const terminal = refuseTerminal(state, command);
  if (terminal) return terminal;
  if (!outcomeUnknown(state)) {
    return refuse(
      state,
      command,
      'OUTCOME_KNOWN',
      `no attempt's outcome is unknown in state ${state.status}`,
      state.directive,
    );
  }
  if (state.status === 'dispatched') {
    const timesOut = addMs(state.dispatched_at ?? state.since, dispatchTimeoutMs(state.definition.policy));
    const window = judgeWindow(command, timesOut);
    if (window === 'unbounded')
      return refuseUnboundedClock(state, command, `a manual verification of attempt ${state.current_attempt}`);
    if (window !== 'closed') {
      return refuse(
        state,
        command,
        'ATTEMPT_IN_FLIGHT',
        `attempt ${state.current_attempt} may still be running until ${window.open}`,
        directiveFor('dispatched', state),
      );
    }
  }
  const { outcome } = command.fact.data;
  if (outcome === 'not_found') {
    const premature = refuseInconclusiveNotFound(state, command);
    if (premature) return premature;
  }
  const after = applyFact(state, command);
  const cause = command.event_id;
  return outcome === 'found_committed'
    ? accept(after, command, transition(state, after, 'succeeded', TRANSITION_REASONS.manuallyVerifiedCommitted, cause))
    : accept(
        after,
        command,
        moveOrEscalate(state, after, 'retry_ready', TRANSITION_REASONS.manuallyVerifiedNotFound, cause),
      );
}

/** Cancelling ends the step; it may not hide a write whose outcome nobody knows (resolve it first). */
function decideCancel(state: PlannedStep, command: Command & { fact: { type: 'StepCancelled' } }): Decision {
  const terminal = refuseTerminal(state, command);
  if (terminal) return terminal;
  if (outcomeUnknown(state)) {
    return refuse(
      state,
      command,
      'OUTCOME_UNVERIFIED',
      `attempt ${state.current_attempt}'s outcome is unknown (state ${state.status}): resolve it first (OutcomeVerifiedManually)`,
      state.directive,
    );
  }
  const after = applyFact(state, command);
  return accept(after, command, transition(state, after, 'cancelled', TRANSITION_REASONS.cancelled, command.event_id));
}

/**
 * A new, bounded budget for an escalated step whose every outcome is known. It goes back to where a
 * new attempt may run: `needs_input` when its last envelope asked for a corrected input (that input
 * stays refused, §4.2), `awaiting_approval` when an approval it needs no longer stands for the input
 * it would run (§4.4), `retry_ready` otherwise.
 */
function decideReopen(state: PlannedStep, command: Command & { fact: { type: 'StepReopened' } }): Decision {
  const terminal = refuseTerminal(state, command);
  if (terminal) return terminal;
  if (state.status !== 'escalated')
    return refuse(
      state,
      command,
      'STEP_NOT_ESCALATED',
      `only an escalated step may be reopened, not one in state ${state.status}`,
      state.directive,
    );
  if (outcomeUnknown(state)) {
    return refuse(
      state,
      command,
      'OUTCOME_UNVERIFIED',
      `attempt ${state.current_attempt}'s outcome is unknown and unverified: resolve it first (OutcomeVerifiedManually)`,
      state.directive,
    );
  }
  const after = applyFact(state, command);
  return accept(
    after,
    command,
    transition(state, after, reopenedStatus(state), TRANSITION_REASONS.reopened, command.event_id),
  );
}

/**
 * Taking an escalation changes no status: the step waits, escalated, for a person's resolution.
 * Someone else's escalation is taken over only on purpose (`reassign`), never by a second click
 * (docs/contract.md §4.10).
 */
function decideAcknowledge(
  state: PlannedStep,
  command: Command & { fact: { type: 'EscalationAcknowledged' } },
): Decision {
  const terminal = refuseTerminal(state, command);
  if (terminal) return terminal;
  if (state.status !== 'escalated')
    return refuse(
      state,
      command,
      'STEP_NOT_ESCALATED',
      `only an escalation may be acknowledged, not a step in state ${state.status}`,
      state.directive,
    );
  const holder = state.acknowledged?.assignee;
  if (holder !== undefined && holder !== command.fact.data.assignee && command.fact.data.reassign !== true)
    return refuse(
      state,
      command,
      'ESCALATION_ALREADY_ACKNOWLEDGED',
      `${holder} has this escalation: acknowledge with reassign to give it to ${command.fact.data.assignee}`,
      state.directive,
    );
  return { kind: 'accepted', events: [command.fact], state: applyFact(state, command) };
}

/**
 * A `not_found`, automated or recorded by a person, is conclusive only once the consistency window
 * has passed since the last instant the attempt may have reached the provider, not since its
 * dispatch: a paused dispatcher or a slow upstream may still send until then (§4.5).
 */
function refuseInconclusiveNotFound(state: PlannedStep, command: Command): Decision | undefined {
  const window = judgeWindow(command, addMs(lastReachOf(state), state.definition.policy.consistency_window_ms));
  if (window === 'closed') return undefined;
  if (window === 'unbounded')
    return refuseUnboundedClock(state, command, `a not_found of attempt ${state.current_attempt}`);
  return refuse(state, command, 'VERIFICATION_PREMATURE', `not_found is inconclusive before ${window.open}`, {
    next_action: 'verify_operation',
    not_before: window.open,
    attempts_remaining: attemptsRemaining(state),
  });
}

/** The pure decider: (state, submitted fact, now) -> events to append, or a refusal. */
export function decide(state: StepState, command: Command): Decision {
  const { fact } = command;
  if (fact.type === 'StepPlanned') {
    if (!isPlanned(state)) {
      const after = applyFact(state, command);
      return accept(after, command, transition(state, after, 'planned', TRANSITION_REASONS.planned, command.event_id));
    }
    if (sameDefinition(state.definition, fact.data)) return { kind: 'accepted', events: [], state };
    return refuse(
      state,
      command,
      'OPERATION_REF_REUSED',
      'this operation_ref was planned with another definition',
      state.directive,
    );
  }
  if (!isPlanned(state)) {
    return refuse(state, command, 'STEP_NOT_PLANNED', `${fact.type} before StepPlanned`, {
      next_action: 'none',
      attempts_remaining: 0,
    });
  }
  switch (fact.type) {
    case 'AttemptDispatched':
      return decideDispatch(state, command, fact.data.attempt, fact.data.input_hash);
    case 'EnvelopeRecorded':
      return decideEnvelope(state, { ...command, fact });
    case 'VerificationRecorded':
      return decideVerification(state, { ...command, fact });
    case 'ApprovalRecorded':
      return decideApproval(state, { ...command, fact });
    case 'OutcomeVerifiedManually':
      return decideManualVerification(state, { ...command, fact });
    case 'StepCancelled':
      return decideCancel(state, { ...command, fact });
    case 'StepReopened':
      return decideReopen(state, { ...command, fact });
    case 'EscalationAcknowledged':
      return decideAcknowledge(state, { ...command, fact });
    default: {
      const unhandled: never = fact;
      throw new Error(`unhandled fact ${JSON.stringify(unhandled)}`);
    }
  }
}
