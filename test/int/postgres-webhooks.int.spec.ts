/**
 * Webhooks shared by the instances on one PostgreSQL database (docs/postgres.md, "Webhooks"): two
 * instances built from source in this process. A subscription made on one is listed by the other;
 * an event submitted on the other reaches a receiver on loopback once, under one delivery id, signed
 * so the `standardwebhooks` package (the spec's reference library) verifies it; when the instance
 * that consumes the log stops mid-stream, the other takes the consumer's turn and every event is
 * delivered, each under its one id. The last case does it with two built processes, the consumer
 * killed (SIGKILL) mid-stream. First, the service over two stores: one whose consumer session the
 * server ended still counts refusals, and the other consumes on from the checkpoint.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { PostgresWebhookStore } from '../../src/adapters/postgres/postgres-webhook-store.adapter';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { systemClock } from '../../src/shared/clock';
import type { StoredEvent } from '../../src/store/event-store.port';
import { operationStream } from '../../src/store/stream-names';
import { WebhookService } from '../../src/webhooks/webhook.service';
import { ConsumerTurnLostError } from '../../src/webhooks/webhook-store.port';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { describeWithPostgres } from '../support/postgres';
import { until } from '../support/until';

const RUNTIME_KEY = 'pghooks-runtime-key-0000001';
const ADMIN_KEY = 'pghooks-admin-key-000000001';
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };
const OTHER_RUNTIME_KEY = 'pghooks-runtime-key-0000002';
const OTHER_ADMIN_KEY = 'pghooks-admin-key-000000002';
const OTHER_ADMIN = { authorization: `Bearer ${OTHER_ADMIN_KEY}` };

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on loopback that keeps every request and answers 204. */
async function receiver(): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Each operation's delivery ids, as a receiver got them (a repeat of one id is the same delivery). */
function idsByOperation(received: readonly Received[]): Map<string, Set<string>> {
  const ids = new Map<string, Set<string>>();
  for (const delivery of received) {
    const ref = JSON.parse(delivery.body).data.operation_ref as string;
    ids.set(ref, (ids.get(ref) ?? new Set()).add(String(delivery.headers['webhook-id'])));
  }
  return ids;
}

/** The sessions holding the webhook consumer's advisory lock, as the server names them. */
async function consumerSessions(url: string): Promise<number> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'recovery-ledger-webhook-consumer'",
    );
    return Number(rows[0].n);
  } finally {
    await client.end();
  }
}

/** The instances' settings: both tenants' keys, receivers on loopback, quick retries. */
const env = (url: string) => ({
  LEDGER_STORE: 'postgres',
  DATABASE_URL: url,
  LEDGER_API_KEYS: [
    `${RUNTIME_KEY}:runtime:acme`,
    `${ADMIN_KEY}:admin:acme`,
    `${OTHER_RUNTIME_KEY}:runtime:globex`,
    `${OTHER_ADMIN_KEY}:admin:globex`,
  ].join(','),
  LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
  LEDGER_WEBHOOK_RETRY_BASE_MS: '100',
  LEDGER_WEBHOOK_RETRY_MAX_MS: '500',
  // A delivery claimed by a killed sender is sent by another once this and a margin have passed.
  LEDGER_WEBHOOK_TIMEOUT_MS: '1000',
});

/** A transition as the log holds it: the consumer resets premature counts at it, and nothing else. */
function transition(position: number, ref: string): StoredEvent {
  return {
    stream: operationStream('acme', ref),
    revision: position - 1,
    position,
    event_id: randomUUID(),
    type: 'TransitionRecorded',
    data: { from: 'planned', to: 'dispatching', reason: 'test' },
    metadata: {
      schema_version: 1,
      recorded_at: new Date().toISOString(),
      actor: 'local',
      tenant: 'acme',
      operation_ref: ref,
      prev_hash: '0'.repeat(64),
      hash: '0'.repeat(64),
    },
  } as StoredEvent;
}

// First in the file: the instances started below set DATABASE_URL in this process's environment,
// where test/support/postgres.ts would then look for a server.
describeWithPostgres('the webhook service on PostgreSQL when its consumer session ends', (database) => {
  it('an instance that lost the consumer turn still counts a premature refusal, and the next consumer goes on', async () => {
    const log = SqliteEventStore.open({ file: ':memory:' });
    const first = await PostgresWebhookStore.open({ connectionString: database().url });
    const second = await PostgresWebhookStore.open({ connectionString: database().url });
    try {
      const service = new WebhookService(log, first, systemClock);
      expect(await first.takeConsumerTurn()).toBe(true);
      await service.subscribe('acme', {
        url: 'https://hooks.example.com/ledger',
        kinds: ['verification.premature_repeated'],
        premature_refusals: 1,
      });
      // Consumed, changing nothing: the position is not yet durable (docs/webhooks.md).
      await service.consume([transition(1, 'run_1/step_1')]);
      expect(await second.checkpoint()).toBe(0);

      // What a killed process or a cut leaves the server to do: end the consumer's session.
      const admin = new Client({ connectionString: database().url });
      await admin.connect();
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'recovery-ledger-webhook-consumer'",
      );
      await admin.end();
      await until(
        () => second.takeConsumerTurn(),
        (taken) => taken,
        'the other store to take the consumer turn',
      );

      await service.onRefused('VERIFICATION_PREMATURE', 'acme', 'run_1/step_1');
      expect((await second.deliveries('acme', { limit: 10 })).map((delivery) => delivery.kind)).toEqual([
        'verification.premature_repeated',
      ]);
      await expect(
        first.commitBatch({ position: 2, deliveries: [], watches: [], resetPremature: [] }),
      ).rejects.toBeInstanceOf(ConsumerTurnLostError);
      expect(await second.commitBatch({ position: 1, deliveries: [], watches: [], resetPremature: [] })).toBe(true);
      expect(await first.checkpoint()).toBe(1);
      await service.stop();
    } finally {
      await Promise.all([first.close(), second.close(), log.close()]);
    }
  });
});

describeWithPostgres('webhooks shared by the instances on PostgreSQL', (database) => {
  const started: InProcessLedger[] = [];
  const processes: LedgerProcess[] = [];
  const receivers: Array<Awaited<ReturnType<typeof receiver>>> = [];
  let target: Awaited<ReturnType<typeof receiver>>;
  const sessions = () => consumerSessions(database().url);

  const start = async () => {
    const ledger = await startLedgerInProcess({ env: env(database().url) });
    started.push(ledger);
    return ledger;
  };

  beforeAll(async () => {
    target = await receiver();
    receivers.push(target);
  });

  afterAll(async () => {
    for (const ledger of [...started.splice(0), ...processes.splice(0)]) {
      await ledger.stop();
      ledger.cleanup();
    }
    await Promise.all(receivers.map((each) => each.close()));
  });

  let secret: string;
  let subscriptionId: string;
  const run = `run_${randomUUID().slice(0, 8)}`;

  it('a subscription made on one instance delivers, once and signed, an event submitted on the other', async () => {
    const a = await start();
    // A alone first: it takes the consumer's turn, so the case below knows which instance consumes.
    await until(sessions, (sessions) => sessions === 1, 'the first instance to take the consumer turn');
    const b = await start();

    const created = await request(
      a.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url: target.url, kinds: ['step.escalated'] },
      ADMIN,
    );
    expect(created.status).toBe(201);
    secret = created.body.secret;
    subscriptionId = created.body.id;
    const listedOnB = await request(b.baseUrl, 'GET', '/v1/admin/webhooks', undefined, ADMIN);
    expect(listedOnB.body.subscriptions.map((each: { id: string }) => each.id)).toEqual([subscriptionId]);

    await incidentsAt(b.baseUrl, RUNTIME_KEY).escalated(`${run}/first`, run, 'pay_invoice');
    const [delivery] = await until(
      async () => target.received,
      (all) => all.length >= 1,
      'the delivery of the event submitted on the other instance',
    );
    const body = new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>);
    expect(body).toMatchObject({
      type: 'step.escalated',
      subscription_id: subscriptionId,
      data: { operation_ref: `${run}/first` },
    });
    expect(delivery.headers['webhook-id']).toBe(delivery.headers['recovery-ledger-delivery']);

    // Both instances read the one outbox: one row, delivered at its first attempt.
    for (const ledger of [a, b]) {
      const listed = await until(
        async () => (await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, ADMIN)).body,
        (answer) => answer.deliveries?.[0]?.status === 'delivered',
        'the delivery marked delivered',
      );
      expect(listed.deliveries).toEqual([
        expect.objectContaining({ id: delivery.headers['webhook-id'], status: 'delivered', attempts: 1 }),
      ]);
      expect(listed.counts).toEqual({ pending: 0, delivered: 1, failed: 0 });
    }
    expect(target.received).toHaveLength(1);
  });

  it('the other instance takes over when the consumer stops mid-stream: every event delivered, one id each', async () => {
    const [a, b] = started;
    const ops = incidentsAt(b.baseUrl, RUNTIME_KEY);
    const refs = Array.from({ length: 8 }, (_, index) => `${run}/step_${index}`);
    for (const ref of refs.slice(0, 4)) await ops.escalated(ref, run, 'pay_invoice');
    // The consumer stops with events after its checkpoint, perhaps with some consumed and not sent.
    await a.stop();
    started.splice(started.indexOf(a), 1);
    a.cleanup();
    for (const ref of refs.slice(4)) await ops.escalated(ref, run, 'pay_invoice');
    await until(sessions, (sessions) => sessions === 1, 'the remaining instance to take the consumer turn');

    const ids = await until(
      async () => idsByOperation(target.received),
      (byOperation) => refs.every((ref) => byOperation.has(ref)),
      'every event delivered after the takeover',
    );
    for (const ref of refs) expect([ref, ids.get(ref)?.size]).toEqual([ref, 1]);
    for (const delivery of target.received) {
      expect(new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>)).toMatchObject({
        subscription_id: subscriptionId,
      });
    }
    // The outbox holds one row per event, each delivered: nothing lost, nothing enqueued twice.
    const outbox = await until(
      async () => (await request(b.baseUrl, 'GET', '/v1/webhooks/deliveries?limit=100', undefined, ADMIN)).body,
      (answer) => answer.counts?.delivered === refs.length + 1,
      'every delivery marked delivered',
    );
    expect(outbox.counts).toEqual({ pending: 0, delivered: refs.length + 1, failed: 0 });
    expect(new Set(outbox.deliveries.map((each: { id: string }) => each.id)).size).toBe(refs.length + 1);
  });

  it('another process takes over after a SIGKILL mid-stream: nothing lost, one id per event', async () => {
    // Built processes now, on the same database: the instances above are stopped first, and this
    // case's tenant is another one, so their subscription hears nothing of it.
    for (const ledger of started.splice(0)) {
      await ledger.stop();
      ledger.cleanup();
    }
    await until(sessions, (count) => count === 0, 'the in-process instances to let go of the consumer turn');
    const a = await startLedger({ env: env(database().url) });
    processes.push(a);
    await until(sessions, (count) => count === 1, 'the first process to take the consumer turn', 60_000);
    const b = await startLedger({ env: env(database().url) });
    processes.push(b);

    const killed = await receiver();
    receivers.push(killed);
    const created = await request(
      b.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url: killed.url, kinds: ['step.escalated'] },
      OTHER_ADMIN,
    );
    expect(created.status).toBe(201);
    const otherRun = `run_${randomUUID().slice(0, 8)}`;
    const refs = Array.from({ length: 12 }, (_, index) => `${otherRun}/step_${index}`);
    const ops = incidentsAt(b.baseUrl, OTHER_RUNTIME_KEY);
    for (const [index, ref] of refs.entries()) {
      // Killed a third of the way through, while it consumes and sends what came before.
      if (index === 4) await a.kill();
      await ops.escalated(ref, otherRun, 'pay_invoice');
    }
    expect(a.child.signalCode).toBe('SIGKILL');

    const ids = await until(
      async () => idsByOperation(killed.received),
      (byOperation) => refs.every((ref) => byOperation.has(ref)),
      'every event delivered after the kill',
      60_000,
    );
    // At least once, one id each (docs/webhooks.md): a repeat is the same id, never a second one.
    for (const ref of refs) expect([ref, ids.get(ref)?.size]).toEqual([ref, 1]);
    for (const delivery of killed.received) {
      expect(
        new Webhook(created.body.secret).verify(delivery.body, delivery.headers as Record<string, string>),
      ).toMatchObject({ subscription_id: created.body.id });
    }
    const outbox = await until(
      async () => (await request(b.baseUrl, 'GET', '/v1/webhooks/deliveries?limit=100', undefined, OTHER_ADMIN)).body,
      (answer) => answer.counts?.delivered === refs.length,
      'every delivery marked delivered',
      60_000,
    );
    expect(outbox.counts).toEqual({ pending: 0, delivered: refs.length, failed: 0 });
    expect(await sessions()).toBe(1);
  }, 180_000);
});
