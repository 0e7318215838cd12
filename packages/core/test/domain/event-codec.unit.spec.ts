/**
 * The one event codec between the store's JSON and the domain's events: what the ledger writes
 * decodes back to the same event, what it would not write is refused both ways, and projections
 * read tolerantly (skipping, never throwing).
 */
import {
  decodeRecordedEvent,
  DEFAULT_POLICY,
  encodeLedgerEvent,
  EventShapeError,
  type LedgerEvent,
  readLedgerEvent,
} from '@recovery-ledger/core';
import { planned, T0 } from '../support/given';

const dispatch: LedgerEvent = { type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'h1' } };

describe('encodeLedgerEvent', () => {
  it('gives the store the event data itself (so the bytes hashed are the ones decided) and it decodes back', () => {
    const fact = planned();
    const stored = encodeLedgerEvent(fact, 'e1');
    expect(stored.type).toBe('StepPlanned');
    expect(stored.data).toBe(fact.data);
    expect(decodeRecordedEvent({ event_id: 'e1', ...stored, recorded_at: T0 })).toEqual({
      ...fact,
      event_id: 'e1',
      recorded_at: T0,
    });
  });

  it('refuses an event of a shape the ledger never writes, or data that is not JSON', () => {
    const malformed = {
      type: 'AttemptDispatched',
      data: { attempt: 'one', input_hash: 'h1' },
    } as unknown as LedgerEvent;
    expect(() => encodeLedgerEvent(malformed, 'e2')).toThrow(EventShapeError);
    const notJson = {
      type: 'AttemptDispatched',
      data: { attempt: 1, input_hash: 'h1', at: () => 0 },
    } as unknown as LedgerEvent;
    expect(() => encodeLedgerEvent(notJson, 'e3')).toThrow(/not a JSON object/);
    expect(() => encodeLedgerEvent(dispatch, 'e4')).not.toThrow();
  });
});

describe('readLedgerEvent (the projections)', () => {
  it('reads what the ledger writes, and a plan whose policy lacks fields', () => {
    expect(readLedgerEvent(dispatch)).toEqual(dispatch);
    const partial = {
      type: 'StepPlanned',
      data: { run_id: 'r', tool: 't', side_effect: 'write', input_hash: 'h', policy: { max_attempts: 3 } },
    };
    expect(readLedgerEvent(partial)?.type).toBe('StepPlanned');
    expect(readLedgerEvent({ type: 'StepPlanned', data: { ...partial.data, policy: DEFAULT_POLICY } })?.type).toBe(
      'StepPlanned',
    );
  });

  it('skips a type it does not know, data that is not an object, and data of another shape', () => {
    expect(readLedgerEvent({ type: 'SomethingNew', data: { anything: 1 } })).toBeUndefined();
    expect(readLedgerEvent({ type: 'TransitionRecorded', data: null })).toBeUndefined();
    expect(
      readLedgerEvent({ type: 'TransitionRecorded', data: { to: { toString: 0 }, from: 'planned', reason: 'R' } }),
    ).toBeUndefined();
  });
});
