import {
  type Directive,
  type EventView,
  isPlanned,
  type StepState,
  type StepView,
  type SubmitAnswer,
  type SubmitResult,
} from '@recovery-ledger/core';
import type { StoredEvent } from '../store/event-store.port';

/**
 * How a step is shown: the view of its state at a revision, and the answer to a submit. Pure
 * shaping of what the ledger decided, shared by the command path, the reads and the CLI (which
 * shows the same view after each event of a replay).
 */
export function stateView(operationRef: string, state: StepState, revision: number): StepView {
  if (!isPlanned(state)) {
    return {
      operation_ref: operationRef,
      status: 'unplanned',
      revision,
      attempts_used: 0,
      current_attempt: 0,
      attempts_remaining: 0,
    };
  }
  return {
    operation_ref: operationRef,
    status: state.status,
    revision,
    run_id: state.definition.run_id,
    tool: state.definition.tool,
    side_effect: state.definition.side_effect,
    policy: state.definition.policy,
    attempts_used: state.attempts_used,
    current_attempt: state.current_attempt,
    attempts_remaining: state.directive.attempts_remaining,
    ...(state.not_before === undefined ? {} : { not_before: state.not_before }),
    approval: state.approval,
    reason: state.reason,
    since: state.since,
    ...(state.status === 'dispatched' && state.call_deadline !== undefined
      ? { call_deadline: state.call_deadline }
      : {}),
    ...(state.approval_input_hash === undefined
      ? {}
      : {
          approval_input_hash: state.approval_input_hash,
          approval_input: {
            input_hash: state.approval_input_hash,
            recorded: state.approval_input !== undefined,
            ...(state.approval_input === undefined ? {} : { input: state.approval_input }),
          },
        }),
    ...(state.last_envelope ? { last_envelope: state.last_envelope } : {}),
    ...(state.last_verification ? { last_verification: state.last_verification } : {}),
    ...(state.success ? { success: state.success } : {}),
    ...(state.possible_duplicate ? { possible_duplicate: state.possible_duplicate } : {}),
    ...(state.acknowledged ? { acknowledged: state.acknowledged } : {}),
    ...(state.cancel_reason === undefined ? {} : { cancel_reason: state.cancel_reason }),
  };
}

/** What the runtime may do next; an operation that was never planned has nothing to do. */
export function directiveOf(state: StepState): Directive {
  return isPlanned(state) ? state.directive : { next_action: 'none', attempts_remaining: 0 };
}

/** Where a submit left the step, at the revision and log position its append (or resubmission) names. */
export interface SubmitOutcome {
  operationRef: string;
  state: StepState;
  revision: number;
  position: number;
  results: SubmitResult[];
  /** A dispatch on a succeeded step: the answer replays the original success. */
  replayed: boolean;
}

export function submitAnswer({
  operationRef,
  state,
  revision,
  position,
  results,
  replayed,
}: SubmitOutcome): SubmitAnswer {
  return {
    revision,
    position,
    state: stateView(operationRef, state, revision),
    directive: directiveOf(state),
    results,
    ...(replayed && isPlanned(state) ? { replayed: true as const, success: state.success } : {}),
  };
}

/** One stored event in its wire shape (`EventView`, the contract's one definition of it). */
export function eventView(event: StoredEvent): EventView {
  return {
    revision: event.revision,
    position: event.position,
    event_id: event.event_id,
    type: event.type,
    recorded_at: event.metadata.recorded_at,
    actor: event.metadata.actor,
    ...(event.metadata.causation_event_id ? { causation_event_id: event.metadata.causation_event_id } : {}),
    ...(event.metadata.traceparent ? { traceparent: event.metadata.traceparent } : {}),
    schema_version: event.metadata.schema_version,
    data: event.data,
    prev_hash: event.metadata.prev_hash,
    hash: event.metadata.hash,
  };
}
