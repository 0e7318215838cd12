import {
  isErrorCode,
  LedgerProblem,
  type SubmitAnswer,
  type SubmitContext,
  type SubmitRequest,
  type SubmitResult,
  type SubmittedEvent,
} from '@recovery-ledger/core';
import type { StoredEvent } from '../store/event-store.port';
import { derivedEventId, submittedHash } from './event-ids';
import type { SealedStreams } from './sealed-streams';
import { directiveOf, stateView, submitAnswer } from './step-views';
import { toRecorded } from './stored-events';

/**
 * Event-id idempotency (docs/contract.md §4): a fact resubmitted under its event id is answered as
 * the first time and appends nothing; an event id reused for another fact is refused.
 */

/**
 * The submitted events the stream does not hold yet, in order, given those of their ids it holds
 * (`stored`). Throws EVENT_ID_REUSED when an id the stream holds was used for another fact.
 */
export function freshEvents(
  request: SubmitRequest,
  stored: readonly StoredEvent[],
): { fresh: SubmittedEvent[]; stored: ReadonlySet<string> } {
  const hashes = new Map(stored.map((event) => [event.event_id, event.metadata.submitted_hash]));
  request.events.forEach((event, index) => {
    if (hashes.has(event.event_id) && hashes.get(event.event_id) !== submittedHash(event)) {
      throw new LedgerProblem('EVENT_ID_REUSED', `event_id ${event.event_id} was already used for another fact`, {
        field: `events[${index}].event_id`,
      });
    }
  });
  return { fresh: request.events.filter((event) => !hashes.has(event.event_id)), stored: new Set(hashes.keys()) };
}

/** The most events a decision derives from one fact (a late outcome, a transition, …), with room to spare. */
const MAX_DERIVED_PER_FACT = 8;

/**
 * A resubmission of facts already stored (`stored`, in revision order): the answer of the first
 * time, from the stream as it stood right after that submit (its facts and everything they caused).
 * What they caused is found by its derived ids (src/ledger/event-ids.ts) and the state then is
 * folded from the kept state before it: the cost does not grow with the stream.
 */
export async function answerAsFirstTime(
  context: SubmitContext,
  request: SubmitRequest,
  stored: readonly StoredEvent[],
  streams: SealedStreams,
  stream: string,
): Promise<SubmitAnswer> {
  const ids = new Set(request.events.map((event) => event.event_id));
  const derivedIds = [...ids].flatMap((id) =>
    Array.from({ length: MAX_DERIVED_PER_FACT }, (_, index) => derivedEventId(id, index + 1)),
  );
  const caused = await streams.readByIds(stream, derivedIds);
  const last = [...stored, ...caused].reduce((latest, event) => (event.revision > latest.revision ? event : latest));
  const { state } = await streams.stateAt(stream, last.revision);
  const results: SubmitResult[] = request.events.map((event) => ({ event_id: event.event_id, status: 'duplicate' }));
  const refusal = stored.map(toRecorded).find((event) => event.type === 'DispatchRefused');
  const code =
    refusal?.type === 'DispatchRefused'
      ? refusal.data.code
      : refusedLateOutcome(stored, caused)
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
function refusedLateOutcome(stored: readonly StoredEvent[], caused: readonly StoredEvent[]): boolean {
  return stored.some(
    (event) =>
      event.type === 'LateOutcomeRecorded' &&
      !caused.some((other) => other.metadata.causation_event_id === event.event_id),
  );
}
