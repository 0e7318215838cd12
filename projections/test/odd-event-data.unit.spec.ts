/**
 * Event data a projection cannot turn into text the usual way (an object whose toString is not a
 * function) is shown, not thrown on: a fold that throws stops the engine for every reader. The
 * case is the one the property "evolve never throws" found (fast-check seed 376833756).
 */
import { LEDGER_PROJECTIONS } from '../src/projection-catalog';
import { foldProjection } from './support/fold-projection';

it('no projection throws on a transition whose `to` cannot be converted to a string', () => {
  const events = [
    {
      stream: 'op-acme:a',
      revision: 0,
      position: 1,
      event_id: '00000000-0000-1000-8000-000000000000',
      type: 'TransitionRecorded',
      data: { to: { toString: 0 }, from: { valueOf: 0 }, reason: { toString: 0 } },
      metadata: { recorded_at: '2026-03-01T09:00:00.000Z', actor: '', tenant: 'acme', operation_ref: 'a' },
    },
  ];
  for (const projection of LEDGER_PROJECTIONS)
    expect(() => foldProjection(projection as never, events as never)).not.toThrow();
});
