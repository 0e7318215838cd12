import { canonicalJson } from '@recovery-ledger/core';
import { GENESIS_HASH, sealEvents, verifyChain } from '../../../src/integrity/hash-chain';
import type { StoredEvent } from '../../../src/store/event-store.port';

const meta = {
  schema_version: 1,
  recorded_at: '2026-12-02T10:00:00.000Z',
  actor: 'a',
  tenant: 't',
  operation_ref: 'r',
};

function chain(count: number): StoredEvent[] {
  const sealed = sealEvents(
    'op-t:r',
    undefined,
    Array.from({ length: count }, (_, i) => ({ event_id: `e${i}`, type: 'T', data: { i }, metadata: meta })),
  );
  return sealed.map((event, revision) => ({ ...event, stream: 'op-t:r', revision, position: revision + 1 }));
}

describe('hash chain', () => {
  describe('from a revision (the tail after a kept state)', () => {
    it('checks only the tail: from its first event on, each re-hashed and chained', () => {
      const tail = chain(10).slice(6);
      expect(verifyChain(tail, undefined, 6)).toBeUndefined();
    });

    it('names a rewritten event of the tail, the first one included', () => {
      const events = chain(10);
      const rewritten = events.slice(6).map((event) => (event.revision === 8 ? { ...event, data: { i: 99 } } : event));
      expect(verifyChain(rewritten, undefined, 6)).toMatchObject({ revision: 8, reason: 'hash_mismatch' });
      const first = events.slice(6).map((event) => (event.revision === 6 ? { ...event, data: { i: 99 } } : event));
      expect(verifyChain(first, undefined, 6)).toMatchObject({ revision: 6, reason: 'hash_mismatch' });
    });

    it('refuses a tail that does not start at the asked revision, or has a gap', () => {
      const events = chain(10);
      expect(verifyChain(events.slice(7), undefined, 6)).toMatchObject({ revision: 7, reason: 'revision_gap' });
      expect(verifyChain([events[6], events[8]], undefined, 6)).toMatchObject({ revision: 8, reason: 'revision_gap' });
    });

    it('re-hashes only past a head already verified within the tail', () => {
      const events = chain(10);
      // A forged event before the verified head is not re-hashed (it was, when verified) …
      const tail = events.slice(4).map((event) => (event.revision === 5 ? { ...event, data: { i: 99 } } : event));
      expect(verifyChain(tail, { revision: 7, hash: events[7].metadata.hash }, 4)).toBeUndefined();
      // … one after it is.
      const later = events.slice(4).map((event) => (event.revision === 8 ? { ...event, data: { i: 99 } } : event));
      expect(verifyChain(later, { revision: 7, hash: events[7].metadata.hash }, 4)).toMatchObject({
        revision: 8,
        reason: 'hash_mismatch',
      });
    });
  });

  it('chains each event to the previous one from the genesis hash', () => {
    const events = chain(3);
    expect(events[0].metadata.prev_hash).toBe(GENESIS_HASH);
    expect(events[1].metadata.prev_hash).toBe(events[0].metadata.hash);
    expect(verifyChain(events)).toBeUndefined();
  });

  it('names the first event that was rewritten', () => {
    const events = chain(4);
    events[2] = { ...events[2], data: { i: 99 } };
    expect(verifyChain(events)).toMatchObject({ revision: 2, reason: 'hash_mismatch' });
  });

  it('detects a removed event', () => {
    const events = chain(4);
    expect(verifyChain([events[0], events[2], events[3]])).toMatchObject({ revision: 2, reason: 'revision_gap' });
  });

  it('does not depend on key order or global position', () => {
    const events = chain(2).map((e) => ({
      ...e,
      position: e.position + 1000,
      data: JSON.parse(JSON.stringify(e.data)),
    }));
    expect(verifyChain(events)).toBeUndefined();
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 1, e: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[1,{"e":2,"f":1}]},"b":1}',
    );
  });
});
