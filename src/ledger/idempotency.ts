import type {
  SubmitAnswer,
  SubmitContext,
  SubmitRequest,
  SubmitResult,
  SubmittedEvent,
} from '@recovery-ledger/core/contract/ledger-api.types';
import { isErrorCode } from '@recovery-ledger/core/errors/error-registry';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';
import { submittedHash } from './event-ids';
import { stateAfter, type StreamSnapshot } from './sealed-streams';
import { directiveOf, stateView, submitAnswer } from './step-views';

/**
 * Event-id idempotency (docs/contract.md §4): a fact resubmitted under its event id is answered as
 * the first time and appends nothing; an event id reused for another fact is refused.
 */

/**
 * The submitted events the stream does not hold yet, in order. Throws EVENT_ID_REUSED when an id
 * the stream holds was used for another fact.
 */
export function freshEvents(
  request: SubmitRequest,
  snapshot: StreamSnapshot,
): { fresh: SubmittedEvent[]; stored: ReadonlySet<string> } {
  const hashes = new Map(snapshot.events.map((event) => [event.event_id, event.metadata.submitted_hash]));
  request.events.forEach((event, index) => {
    if (hashes.has(event.event_id) && hashes.get(event.event_id) !== submittedHash(event)) {
      throw new LedgerProblem('EVENT_ID_REUSED', `event_id ${event.event_id} was already used for another fact`, {
        field: `events[${index}].event_id`,
      });
    }
  });
  return { fresh: request.events.filter((event) => !hashes.has(event.event_id)), stored: new Set(hashes.keys()) };
}

/**
 * A resubmission of facts already stored: the answer of the first time, from the stream as it
 * stood right after that submit (its fact and everything the fact caused).
 */
export function answerAsFirstTime(
  context: SubmitContext,
  request: SubmitRequest,
  snapshot: StreamSnapshot,
): SubmitAnswer {
  const ids = new Set(request.events.map((event) => event.event_id));
  let end = -1;
  snapshot.events.forEach((event, index) => {
    if (ids.has(event.event_id) || (event.metadata.causation_event_id && ids.has(event.metadata.causation_event_id)))
      end = index;
  });
  const state = stateAfter(snapshot, end + 1);
  const last = snapshot.events[end];
  const results: SubmitResult[] = request.events.map((event) => ({ event_id: event.event_id, status: 'duplicate' }));
  const refusal = snapshot.recorded
    .slice(0, end + 1)
    .find((event) => ids.has(event.event_id) && event.type === 'DispatchRefused');
  const code =
    refusal?.type === 'DispatchRefused'
      ? refusal.data.code
      : refusedLateOutcome(snapshot, ids, end)
        ? 'ATTEMPT_MISMATCH'
        : undefined;
  if (code !== undefined && code !== 'DUPLICATE_PREVENTED') {
    // Only refused dispatches and late envelopes are recorded, and each answers a registered refusal code.
    throw new LedgerProblem(isErrorCode(code) ? code : 'INTERNAL_ERROR', 'this fact was refused when first submitted', {
      directive: directiveOf(state),
      state: stateView(context.operationRef, state, last.revision),
      results,
    });
  }
  return submitAnswer({
    operationRef: context.operationRef,
    state,
    revision: last.revision,
    position: last.position,
    results,
    replayed: refusal !== undefined,
  });
}

/**
 * Whether one of the facts is a late envelope that was recorded as evidence and refused (nothing
 * derived from it); a late success that settled the step caused a transition and was accepted.
 */
function refusedLateOutcome(snapshot: StreamSnapshot, ids: ReadonlySet<string>, end: number): boolean {
  const events = snapshot.events.slice(0, end + 1);
  return events.some(
    (event) =>
      ids.has(event.event_id) &&
      event.type === 'LateOutcomeRecorded' &&
      !events.some((other) => other.metadata.causation_event_id === event.event_id),
  );
}
