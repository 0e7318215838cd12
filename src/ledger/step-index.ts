import { evolve, initialState, isPlanned, type StepState } from '@recovery-ledger/core';
import type { StreamIndexEntry, StreamIndexer } from '../store/event-store.port';
import { toRecorded } from './stored-events';

/**
 * How a step is filed in the store's index, committed with its events: by status, with what a
 * recovery listing shows, so `GET /v1/recovery` answers from the log's own transaction and never
 * from a read model that may lag or be damaged (docs/reliability.md).
 */
export function stepIndexEntry(state: StepState): StreamIndexEntry | undefined {
  if (!isPlanned(state)) return undefined;
  return {
    key: state.status,
    data: {
      tool: state.definition.tool,
      run_id: state.definition.run_id,
      side_effect: state.definition.side_effect,
      since: state.since,
      attempt: state.current_attempt,
      attempts_used: state.attempts_used,
      reason: state.reason,
      ...(state.definition.policy.verification_tool
        ? { verification_tool: state.definition.policy.verification_tool }
        : {}),
    },
  };
}

/**
 * The index entry folded event by event, for a log indexed after it was written (one pass, however
 * long). A stream that does not fold (a forged event) is left out of the index; the audit reports it.
 */
export const stepIndexer: StreamIndexer<StepState | undefined> = {
  start: () => initialState(),
  add: (state, event) => {
    if (state === undefined) return undefined;
    try {
      return evolve(state, toRecorded(event));
    } catch {
      return undefined;
    }
  },
  entry: (state) => (state === undefined ? undefined : stepIndexEntry(state)),
};
