import { canonicalJson } from '@recovery-ledger/core/shared/canonical-json';
import { GENESIS_HASH, sealEvents, verifyChain } from '../../../src/store/hash-chain';
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
