/**
 * The one contract every webhook store passes (src/webhooks/webhook-store.port.ts): subscriptions
 * kept and ended, a consumed batch written with the checkpoint in one transaction (all of it or
 * none), a replayed cause adding no second delivery (one id each, docs/webhooks.md), watches settled
 * once, the outbox read, retried and counted. A store shared by several instances passes the cases
 * of two instances besides: one consumer at a time, another taking over when it goes, and a due
 * delivery claimed by one sender at a time.
 */
import {
  ConsumerTurnLostError,
  deliveryId,
  type ConsumedBatch,
  type NewDelivery,
  type Subscription,
  type WebhookStore,
} from '../../src/webhooks/webhook-store.port';

export interface WebhookStoresUnderTest {
  /**
   * A store over the same data: another instance where the store is shared, the same instance
   * restarted where it is a file of its own (the one opened before is closed first by the test).
   */
  open(): Promise<WebhookStore>;
  cleanup(): Promise<void>;
}

const TENANT = 'acme';

function subscription(id: string, overrides: Partial<Subscription> = {}): Subscription {
  return {
    id,
    tenant: TENANT,
    url: `https://hooks.example.com/${id}`,
    secret: `whsec_${Buffer.from(id.padEnd(24, '.')).toString('base64')}`,
    kinds: ['operation.cancelled', 'unknown_outcome.unresolved'],
    unknown_after_ms: 60_000,
    premature_refusals: 3,
    created_at: '2026-12-01T10:00:00.000Z',
    created_position: 7,
    active: true,
    ...overrides,
  };
}

function newDelivery(subscriptionId: string, cause: string, tenant = TENANT): NewDelivery {
  const id = deliveryId(subscriptionId, cause);
  return {
    id,
    subscription_id: subscriptionId,
    tenant,
    kind: 'operation.cancelled',
    operation_ref: `run/${cause}`,
    body: JSON.stringify({ id, cause }),
    created_at: '2026-12-01T10:00:01.000Z',
  };
}

const emptyBatch = (position: number) => ({ position, deliveries: [], watches: [], resetPremature: [] });

/**
 * `shared`: instances on one database share the store (PostgreSQL), and it passes the cases of two
 * instances too; a file of one instance (SQLite) does not.
 */
export function testWebhookStore(
  name: string,
  { shared }: { shared: boolean },
  factory: () => Promise<WebhookStoresUnderTest>,
): void {
  describe(`webhook store contract: ${name}`, () => {
    let subject: WebhookStoresUnderTest;
    const opened: WebhookStore[] = [];
    const open = async () => {
      const store = await subject.open();
      opened.push(store);
      return store;
    };
    /** A consumer: the store holding the consumer's turn. */
    const consumer = async () => {
      const store = await open();
      expect(await store.takeConsumerTurn()).toBe(true);
      return store;
    };
    /** Another instance on a shared store; the same one restarted on a store of its own. */
    const another = async (first: WebhookStore) => {
      if (!shared) await first.close();
      return open();
    };

    beforeEach(async () => {
      subject = await factory();
    });
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
      await subject.cleanup();
    });

    it('keeps subscriptions per tenant, ends and rotates them, and another instance reads them', async () => {
      const store = await open();
      await store.addSubscription(subscription('whk_a'));
      await store.addSubscription(subscription('whk_b', { created_at: '2026-12-01T10:00:05.000Z' }));
      await store.addSubscription(subscription('whk_other', { tenant: 'other' }));
      expect(await store.rotateSecret(TENANT, 'whk_a', 'whsec_new', '2026-12-02T10:00:00.000Z')).toBe(true);
      expect(await store.rotateSecret('other', 'whk_a', 'whsec_x', '2026-12-02T10:00:00.000Z')).toBe(false);
      expect(await store.deactivate(TENANT, 'whk_b')).toBe(true);
      expect(await store.deactivate(TENANT, 'whk_b')).toBe(false);
      expect(await store.disable('whk_other', 'the receiver answered 410 Gone', '2026-12-01T11:00:00.000Z')).toBe(true);

      const reader = await another(store);
      expect((await reader.subscriptions(TENANT)).map((each) => each.id)).toEqual(['whk_a']);
      expect(await reader.subscriptions(TENANT)).toEqual([
        {
          ...subscription('whk_a'),
          secret: 'whsec_new',
          previous_secret: subscription('whk_a').secret,
          previous_secret_until: '2026-12-02T10:00:00.000Z',
        },
      ]);
      const all = await reader.subscriptions(undefined, false);
      expect(all.map((each) => [each.id, each.active])).toEqual([
        ['whk_a', true],
        ['whk_other', false],
        ['whk_b', false],
      ]);
      // An ended subscription keeps no secret; a disabled one keeps why.
      expect(all.find((each) => each.id === 'whk_b')).toMatchObject({ secret: '' });
      expect(all.find((each) => each.id === 'whk_b')).not.toHaveProperty('previous_secret');
      expect(all.find((each) => each.id === 'whk_other')).toMatchObject({
        disabled_reason: 'the receiver answered 410 Gone',
        disabled_at: '2026-12-01T11:00:00.000Z',
      });
    });

    it('writes a batch with its checkpoint; a replayed cause adds no second delivery; the checkpoint never goes back', async () => {
      const store = await consumer();
      expect(await store.checkpoint()).toBe(0);
      const first = newDelivery('whk_a', 'op1');
      const watch = {
        subscription_id: 'whk_a',
        tenant: TENANT,
        operation_ref: 'run/op2',
        transition_event_id: 'evt_2',
        since: '2026-12-01T10:00:00.000Z',
        due_ms: 1_000,
      };
      expect(await store.commitBatch({ position: 10, deliveries: [first], watches: [watch], resetPremature: [] })).toBe(
        true,
      );
      expect(await store.checkpoint()).toBe(10);
      // The same causes again (a batch consumed again after a takeover): nothing new, one id each.
      expect(
        await store.commitBatch(
          { position: 10, deliveries: [first], watches: [watch], resetPremature: [] },
          { checkpointOnlyWithChanges: true },
        ),
      ).toBe(false);
      expect(await store.commitBatch(emptyBatch(12), { checkpointOnlyWithChanges: true })).toBe(false);
      expect(await store.checkpoint()).toBe(10);
      expect(await store.commitBatch(emptyBatch(12))).toBe(true);
      expect(await store.commitBatch(emptyBatch(11))).toBe(true);
      expect(await store.checkpoint()).toBe(12);
      expect((await store.deliveries(TENANT, { limit: 10 })).map((each) => each.id)).toEqual([first.id]);
      expect(await store.dueWatches(1_000, 10)).toHaveLength(1);

      const reader = await another(store);
      expect(await reader.checkpoint()).toBe(12);
      expect(await reader.delivery(TENANT, first.id)).toMatchObject({
        ...first,
        status: 'pending',
        attempts: 0,
        next_attempt_ms: 0,
      });
    });

    it('writes a batch all or nothing', async () => {
      const store = await consumer();
      const good = newDelivery('whk_a', 'good');
      // A batch that fails after its delivery is written: its watch cannot be read.
      const unreadable = Object.defineProperty(
        {
          subscription_id: 'whk_a',
          tenant: TENANT,
          operation_ref: 'run/x',
          since: '2026-12-01T10:00:00.000Z',
          due_ms: 1,
        },
        'transition_event_id',
        {
          enumerable: true,
          get: () => {
            throw new Error('the batch fails midway');
          },
        },
      ) as ConsumedBatch['watches'][number];
      await expect(
        store.commitBatch({ position: 5, deliveries: [good], watches: [unreadable], resetPremature: [] }),
      ).rejects.toThrow('the batch fails midway');
      expect(await store.checkpoint()).toBe(0);
      expect(await store.delivery(TENANT, good.id)).toBeUndefined();
      // The store is usable after the rolled-back batch.
      expect(await store.commitBatch({ position: 5, deliveries: [good], watches: [], resetPremature: [] })).toBe(true);
      expect(await store.delivery(TENANT, good.id)).toBeDefined();
    });

    it('counts premature refusals until a consumed transition resets them', async () => {
      const store = await consumer();
      expect(await store.countPremature(TENANT, 'run/op1')).toBe(1);
      expect(await store.countPremature(TENANT, 'run/op1')).toBe(2);
      expect(await store.countPremature(TENANT, 'run/op2')).toBe(1);
      expect(
        await store.commitBatch(
          { position: 3, deliveries: [], watches: [], resetPremature: [{ tenant: TENANT, operation_ref: 'run/op1' }] },
          { checkpointOnlyWithChanges: true },
        ),
      ).toBe(true);
      expect(await store.countPremature(TENANT, 'run/op1')).toBe(1);
      expect(await store.countPremature(TENANT, 'run/op2')).toBe(2);
    });

    it('resets every operation a batch names, each once, and only in its own tenant', async () => {
      const store = await consumer();
      for (const ref of ['run/op1', 'run/op2', 'run/op3']) await store.countPremature(TENANT, ref);
      await store.countPremature('tenant-b', 'run/op2');
      await store.countPremature('tenant-b', 'run/op2');
      expect(
        await store.commitBatch(
          {
            position: 3,
            deliveries: [],
            watches: [],
            resetPremature: [
              { tenant: TENANT, operation_ref: 'run/op1' },
              { tenant: TENANT, operation_ref: 'run/op1' },
              { tenant: 'tenant-b', operation_ref: 'run/op2' },
              { tenant: TENANT, operation_ref: 'run/never-counted' },
            ],
          },
          { checkpointOnlyWithChanges: true },
        ),
      ).toBe(true);
      expect(await store.countPremature(TENANT, 'run/op1')).toBe(1);
      expect(await store.countPremature('tenant-b', 'run/op2')).toBe(1);
      expect(await store.countPremature(TENANT, 'run/op2')).toBe(2);
      expect(await store.countPremature(TENANT, 'run/op3')).toBe(2);
      // Nothing to reset and nothing else: no change, so no checkpoint written on its own.
      expect(
        await store.commitBatch(
          {
            position: 4,
            deliveries: [],
            watches: [],
            resetPremature: [{ tenant: TENANT, operation_ref: 'run/never-counted' }],
          },
          { checkpointOnlyWithChanges: true },
        ),
      ).toBe(false);
    });

    it('settles a watch once: its delivery enqueued with it, nothing from a watch already settled', async () => {
      const store = await consumer();
      await store.commitBatch({
        position: 4,
        deliveries: [],
        watches: [
          {
            subscription_id: 'whk_a',
            tenant: TENANT,
            operation_ref: 'run/op1',
            transition_event_id: 'evt_1',
            since: '2026-12-01T10:00:00.000Z',
            due_ms: 500,
          },
          {
            subscription_id: 'whk_a',
            tenant: TENANT,
            operation_ref: 'run/op2',
            transition_event_id: 'evt_2',
            since: '2026-12-01T10:00:00.000Z',
            due_ms: 5_000,
          },
        ],
        resetPremature: [],
      });
      expect(await store.dueWatches(499, 10)).toEqual([]);
      const [due, ...rest] = await store.dueWatches(1_000, 10);
      expect(rest).toEqual([]);
      expect(due).toMatchObject({ operation_ref: 'run/op1', transition_event_id: 'evt_1', due_ms: 500 });
      expect(await store.nextDueMs()).toBe(500);
      const unresolved = newDelivery('whk_a', 'unknown:evt_1');
      const late = newDelivery('whk_a', 'unknown:evt_1-late');
      await store.settleWatch(due.id, unresolved);
      await store.settleWatch(due.id, late);
      expect(await store.dueWatches(1_000, 10)).toEqual([]);
      expect((await store.deliveries(TENANT, { limit: 10 })).map((each) => each.id)).toEqual([unresolved.id]);
      expect((await store.dueWatches(5_000, 10)).map((each) => each.transition_event_id)).toEqual(['evt_2']);
    });

    it('answers due deliveries oldest first, a share per tenant, and keeps each attempt', async () => {
      const store = await open();
      const rows = [
        newDelivery('whk_a', 'a1'),
        newDelivery('whk_a', 'a2'),
        newDelivery('whk_a', 'a3'),
        newDelivery('whk_b', 'b1', 'other'),
      ];
      await store.insertDeliveries(rows);
      await store.insertDeliveries([rows[0]]);
      expect((await store.dueDeliveries(0, 10)).map((each) => each.id)).toEqual(rows.map((row) => row.id));
      expect((await store.dueDeliveries(0, 10, 2)).map((each) => each.id)).toEqual([
        rows[0].id,
        rows[1].id,
        rows[3].id,
      ]);
      expect((await store.dueDeliveries(0, 2)).map((each) => each.id)).toEqual([rows[0].id, rows[1].id]);

      await store.markDelivered(rows[0].id, 204, '2026-12-01T10:00:02.000Z');
      await store.markAttemptFailed(rows[1].id, {
        status: 503,
        error: 'the receiver answered 503',
        nextAttemptMs: 9_000,
      });
      await store.markAttemptFailed(rows[2].id, { error: 'ECONNREFUSED: connect ECONNREFUSED' });
      expect((await store.dueDeliveries(8_999, 10)).map((each) => each.id)).toEqual([rows[3].id]);
      expect((await store.dueDeliveries(9_000, 10)).map((each) => each.id)).toEqual([rows[3].id, rows[1].id]);
      expect(await store.nextDueMs()).toBe(0);

      const reader = await another(store);
      expect(await reader.delivery(TENANT, rows[0].id)).toMatchObject({
        status: 'delivered',
        attempts: 1,
        last_status: 204,
        delivered_at: '2026-12-01T10:00:02.000Z',
      });
      expect(await reader.delivery(TENANT, rows[1].id)).toMatchObject({
        status: 'pending',
        attempts: 1,
        last_status: 503,
        last_error: 'the receiver answered 503',
        next_attempt_ms: 9_000,
      });
      expect(await reader.delivery(TENANT, rows[2].id)).toMatchObject({ status: 'failed', attempts: 1 });
      expect(await reader.delivery('other', rows[0].id)).toBeUndefined();
      // Newest first, by status, per tenant.
      expect((await reader.deliveries(TENANT, { limit: 10 })).map((each) => each.id)).toEqual([
        rows[2].id,
        rows[1].id,
        rows[0].id,
      ]);
      expect((await reader.deliveries(TENANT, { status: 'failed', limit: 10 })).map((each) => each.id)).toEqual([
        rows[2].id,
      ]);
      expect(
        (await reader.counts()).sort((a, b) => `${a.tenant}${a.status}`.localeCompare(`${b.tenant}${b.status}`)),
      ).toEqual([
        { tenant: TENANT, kind: 'operation.cancelled', status: 'delivered', count: 1 },
        { tenant: TENANT, kind: 'operation.cancelled', status: 'failed', count: 1 },
        { tenant: TENANT, kind: 'operation.cancelled', status: 'pending', count: 1 },
        { tenant: 'other', kind: 'operation.cancelled', status: 'pending', count: 1 },
      ]);
      expect(await reader.counts('other')).toEqual([
        { tenant: 'other', kind: 'operation.cancelled', status: 'pending', count: 1 },
      ]);

      // A delivery given up is sent again on request, its attempts kept.
      expect(await reader.requeue(TENANT, rows[2].id, 20_000)).toMatchObject({
        status: 'pending',
        attempts: 1,
        next_attempt_ms: 20_000,
      });
      expect(await reader.requeue('other', rows[2].id, 20_000)).toBeUndefined();
    });

    it('claims the due deliveries it is given for an attempt', async () => {
      const store = await open();
      const rows = [newDelivery('whk_a', 'c1'), newDelivery('whk_a', 'c2')];
      await store.insertDeliveries(rows);
      expect(
        await store.claimDeliveries(
          rows.map((row) => row.id),
          60_000,
        ),
      ).toEqual(rows.map((row) => row.id));
      expect(await store.claimDeliveries([], 60_000)).toEqual([]);
    });
  });

  if (!shared) return;
  describe(`webhook store contract, two instances on one store: ${name}`, () => {
    let subject: WebhookStoresUnderTest;
    const opened: WebhookStore[] = [];
    const open = async () => {
      const store = await subject.open();
      opened.push(store);
      return store;
    };
    beforeEach(async () => {
      subject = await factory();
    });
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
      await subject.cleanup();
    });
    it('one consumer at a time; another commits nothing; it takes over once the first is gone', async () => {
      const [a, b] = [await open(), await open()];
      expect(await a.takeConsumerTurn()).toBe(true);
      expect(await a.takeConsumerTurn()).toBe(true);
      expect(await b.takeConsumerTurn()).toBe(false);
      const replayed = newDelivery('whk_a', 'op1');
      await a.commitBatch({ position: 5, deliveries: [replayed], watches: [], resetPremature: [] });
      await expect(
        b.commitBatch({ position: 9, deliveries: [newDelivery('whk_a', 'op9')], watches: [], resetPremature: [] }),
      ).rejects.toBeInstanceOf(ConsumerTurnLostError);
      expect(await b.checkpoint()).toBe(5);

      await a.close();
      let taken = false;
      for (let tries = 0; !taken && tries < 100; tries++) {
        taken = await b.takeConsumerTurn();
        if (!taken) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(taken).toBe(true);
      // It goes on from the committed checkpoint; consuming the first one's batch again adds nothing.
      expect(await b.checkpoint()).toBe(5);
      await b.commitBatch({ position: 5, deliveries: [replayed], watches: [], resetPremature: [] });
      expect((await b.deliveries(TENANT, { limit: 10 })).map((each) => each.id)).toEqual([replayed.id]);
    });

    it('a claimed delivery goes to one sender at a time, and is due again once marked', async () => {
      const [a, b] = [await open(), await open()];
      const rows = Array.from({ length: 40 }, (_, index) => newDelivery('whk_a', `claim${index}`));
      await a.insertDeliveries(rows);
      const ids = rows.map((row) => row.id);
      const [byA, byB] = await Promise.all([a.claimDeliveries(ids, 60_000), b.claimDeliveries(ids, 60_000)]);
      expect(byA.filter((id) => byB.includes(id))).toEqual([]);
      expect([...byA, ...byB].sort()).toEqual([...ids].sort());
      // Held: neither instance is answered them as due, nor can claim them again.
      expect(await b.dueDeliveries(0, 100)).toEqual([]);
      expect(await a.claimDeliveries(ids, 60_000)).toEqual([]);
      // A failed attempt ends the hold: due again at its next attempt, for whoever claims it.
      await a.markAttemptFailed(ids[0], { status: 500, error: 'the receiver answered 500', nextAttemptMs: 0 });
      expect((await b.dueDeliveries(0, 100)).map((each) => each.id)).toEqual([ids[0]]);
      expect(await b.claimDeliveries([ids[0]], 60_000)).toEqual([ids[0]]);
      // A sender taken for dead whose attempt failed does not undo another's delivery.
      await b.markDelivered(ids[1], 200, '2026-12-01T10:00:03.000Z');
      await a.markAttemptFailed(ids[1], { status: 500, error: 'late', nextAttemptMs: 0 });
      expect(await a.delivery(TENANT, ids[1])).toMatchObject({ status: 'delivered', last_status: 200 });
    });

    it('a hold ends by itself: a delivery whose sender died is sent again, under its one id', async () => {
      const [a, b] = [await open(), await open()];
      const row = newDelivery('whk_a', 'crashed');
      await a.insertDeliveries([row]);
      expect(await a.claimDeliveries([row.id], 1)).toEqual([row.id]);
      let due: string[] = [];
      for (let tries = 0; due.length === 0 && tries < 100; tries++) {
        due = (await b.dueDeliveries(0, 10)).map((each) => each.id);
        if (due.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(due).toEqual([row.id]);
      expect(await b.claimDeliveries([row.id], 60_000)).toEqual([row.id]);
    });
  });
}
