/**
 * The one contract every lease adapter passes (docs/contract.md §6): the rules written in
 * src/store/lease-store.port.ts, on one instance and across two instances sharing a store.
 */
import { randomUUID } from 'node:crypto';
import { withTakeOverGate, type LeaseStore } from '../../src/store/lease-store.port';

export interface LeaseStoresUnderTest {
  /** Two instances over one store (two connections to one file, two clients of one server). */
  stores: [LeaseStore, LeaseStore];
  cleanup(): Promise<void>;
}

const freshKey = () => `contract:${randomUUID()}`;
const T0 = 1_800_000_000_000;

export function testLeaseStore(name: string, factory: () => Promise<LeaseStoresUnderTest>): void {
  describe(`lease store contract: ${name}`, () => {
    let subject: LeaseStoresUnderTest;
    let a: LeaseStore;
    let b: LeaseStore;

    beforeEach(async () => {
      subject = await factory();
      [a, b] = subject.stores;
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    it('grants a free item and refuses it to anyone else while the lease lasts', async () => {
      const key = freshKey();
      const first = await a.acquire({ key, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      expect(first).toMatchObject({
        granted: true,
        lease: { lease_id: 'l1', holder: 'w1', expires_at_ms: T0 + 1000, released: false },
      });
      const second = await b.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 999, ttlMs: 1000 });
      expect(second).toMatchObject({ granted: false, current: { lease_id: 'l1', holder: 'w1' } });
    });

    it('hands an expired lease to another worker and says whose it took over', async () => {
      const key = freshKey();
      await a.acquire({ key, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      const taken = await b.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 1000, ttlMs: 1000 });
      expect(taken).toMatchObject({
        granted: true,
        lease: {
          lease_id: 'l2',
          holder: 'w2',
          took_over: { lease_id: 'l1', holder: 'w1', expired_at_ms: T0 + 1000 },
          previous: { lease_id: 'l1' },
        },
      });
      // The old holder can neither renew nor release what it no longer holds.
      expect(await a.renew(key, 'l1', T0 + 1001, 1000)).toBeUndefined();
      expect(await a.release(key, 'l1', T0 + 1001)).toBe(false);
      expect((await a.getMany([key])).get(key)).toMatchObject({ lease_id: 'l2', holder: 'w2' });
    });

    it('renews its own lease, even past expiry while nobody has taken the item', async () => {
      const key = freshKey();
      await a.acquire({ key, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      expect(await b.renew(key, 'l1', T0 + 500, 1000)).toMatchObject({ expires_at_ms: T0 + 1500 });
      expect(await a.renew(key, 'l1', T0 + 2000, 1000)).toMatchObject({ expires_at_ms: T0 + 3000 });
      expect(await b.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 2999, ttlMs: 1000 })).toMatchObject({
        granted: false,
      });
      expect(await a.renew(key, 'other', T0 + 2000, 1000)).toBeUndefined();
    });

    it('with take-overs held back, leaves an expired lease of another holder alone, and still grants fresh, released and its own', async () => {
      const [expired, fresh, released] = [freshKey(), freshKey(), freshKey()];
      await a.acquire({ key: expired, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      const held = await b.acquire({
        key: expired,
        leaseId: 'l2',
        holder: 'w2',
        nowMs: T0 + 5000,
        ttlMs: 1000,
        takeOver: false,
      });
      expect(held).toMatchObject({ granted: false, current: { lease_id: 'l1', holder: 'w1' } });
      // Nothing was written: its holder may still renew it.
      expect(await a.renew(expired, 'l1', T0 + 5001, 1000)).toMatchObject({ expires_at_ms: T0 + 6001 });
      // The same worker asking again is not a hand-over to someone else.
      expect(
        await a.acquire({ key: expired, leaseId: 'l3', holder: 'w1', nowMs: T0 + 7000, ttlMs: 1000, takeOver: false }),
      ).toMatchObject({ granted: true });
      expect(
        await b.acquire({ key: fresh, leaseId: 'f1', holder: 'w2', nowMs: T0, ttlMs: 1000, takeOver: false }),
      ).toMatchObject({ granted: true });
      await a.acquire({ key: released, leaseId: 'r1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      await a.release(released, 'r1', T0 + 10);
      expect(
        await b.acquire({ key: released, leaseId: 'r2', holder: 'w2', nowMs: T0 + 20, ttlMs: 1000, takeOver: false }),
      ).toMatchObject({ granted: true });
    });

    it('through the take-over gate, hands an expired lease over only while the gate allows it', async () => {
      const key = freshKey();
      let allowed = false;
      const gated = withTakeOverGate(b, () => allowed);
      await a.acquire({ key, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      expect(await gated.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 2000, ttlMs: 1000 })).toMatchObject({
        granted: false,
      });
      allowed = true;
      expect(await gated.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 2000, ttlMs: 1000 })).toMatchObject({
        granted: true,
        lease: { took_over: { holder: 'w1' } },
      });
    });

    it('frees a released item at once, or after the hold it was released with', async () => {
      const key = freshKey();
      await a.acquire({ key, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 10_000 });
      expect(await a.release(key, 'l1', T0 + 10)).toBe(true);
      const next = await b.acquire({ key, leaseId: 'l2', holder: 'w2', nowMs: T0 + 10, ttlMs: 10_000 });
      // A released lease is replaced, not taken over.
      expect(next).toMatchObject({ granted: true, lease: { previous: { lease_id: 'l1', holder: 'w1' } } });
      expect(next.granted && next.lease.took_over).toBeUndefined();
      expect(await b.release(key, 'l2', T0 + 20, 5000)).toBe(true);
      expect(await a.acquire({ key, leaseId: 'l3', holder: 'w1', nowMs: T0 + 5019, ttlMs: 1000 })).toMatchObject({
        granted: false,
      });
      expect(await a.acquire({ key, leaseId: 'l3', holder: 'w1', nowMs: T0 + 5020, ttlMs: 1000 })).toMatchObject({
        granted: true,
      });
      expect(await a.release(key, 'l2', T0 + 5021)).toBe(false);
    });

    it('reads many records at once, leaving out keys that have none', async () => {
      const [k1, k2, k3] = [freshKey(), freshKey(), freshKey()];
      await a.acquire({ key: k1, leaseId: 'l1', holder: 'w1', nowMs: T0, ttlMs: 1000 });
      await b.acquire({ key: k3, leaseId: 'l3', holder: 'w3', nowMs: T0, ttlMs: 1000 });
      const found = await b.getMany([k1, k2, k3]);
      expect([...found.keys()].sort()).toEqual([k1, k3].sort());
      expect(found.get(k3)).toMatchObject({ holder: 'w3' });
    });

    it('grants one item to exactly one of many racing workers on two instances', async () => {
      for (let round = 0; round < 5; round++) {
        const key = freshKey();
        const tries = Array.from({ length: 16 }, (_, index) =>
          (index % 2 === 0 ? a : b).acquire({ key, leaseId: `l${index}`, holder: `w${index}`, nowMs: T0, ttlMs: 1000 }),
        );
        const results = await Promise.all(tries);
        const granted = results.filter((result) => result.granted);
        expect(granted).toHaveLength(1);
        const holder = granted[0].granted ? granted[0].lease.holder : '';
        for (const result of results) if (!result.granted) expect(result.current.holder).toBe(holder);
        // And once it expires, again exactly one.
        const later = await Promise.all(
          Array.from({ length: 8 }, (_, index) =>
            (index % 2 === 0 ? b : a).acquire({
              key,
              leaseId: `m${index}`,
              holder: `v${index}`,
              nowMs: T0 + 1000,
              ttlMs: 1000,
            }),
          ),
        );
        expect(later.filter((result) => result.granted)).toHaveLength(1);
      }
    });
  });
}
