/**
 * Webhooks shared by the instances on one PostgreSQL database (docs/postgres.md, "Webhooks"): two
 * instances built from source in this process. A subscription made on one is listed by the other;
 * an event submitted on the other reaches a receiver on loopback once, under one delivery id, signed
 * so the `standardwebhooks` package (the spec's reference library) verifies it; when the instance
 * that consumes the log stops mid-stream, the other takes the consumer's turn and every event is
 * delivered, each under its one id.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { describeWithPostgres } from '../support/postgres';
import { until } from '../support/until';

const RUNTIME_KEY = 'pghooks-runtime-key-0000001';
const ADMIN_KEY = 'pghooks-admin-key-000000001';
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

describeWithPostgres('webhooks shared by the instances on PostgreSQL', (database) => {
  const started: InProcessLedger[] = [];
  const received: Received[] = [];
  let server: Server;
  let receiverUrl: string;

  const start = async () => {
    const ledger = await startLedgerInProcess({
      env: {
        LEDGER_STORE: 'postgres',
        DATABASE_URL: database().url,
        LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`,
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        LEDGER_WEBHOOK_RETRY_BASE_MS: '100',
        LEDGER_WEBHOOK_RETRY_MAX_MS: '500',
      },
    });
    started.push(ledger);
    return ledger;
  };

  /** The sessions holding the webhook consumer's advisory lock, as the server sees them. */
  const consumerSessions = async (): Promise<number> => {
    const client = new Client({ connectionString: database().url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'recovery-ledger-webhook-consumer'",
      );
      return Number(rows[0].n);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  });

  afterAll(async () => {
    for (const ledger of started.splice(0)) {
      await ledger.stop();
      ledger.cleanup();
    }
    await new Promise((resolve) => server.close(resolve));
  });

  /** Each operation's delivery ids, as the receiver got them (a repeat of one id is the same delivery). */
  const idsByOperation = () => {
    const ids = new Map<string, Set<string>>();
    for (const delivery of received) {
      const ref = JSON.parse(delivery.body).data.operation_ref as string;
      ids.set(ref, (ids.get(ref) ?? new Set()).add(String(delivery.headers['webhook-id'])));
    }
    return ids;
  };

  let secret: string;
  let subscriptionId: string;
  const run = `run_${randomUUID().slice(0, 8)}`;

  it('a subscription made on one instance delivers, once and signed, an event submitted on the other', async () => {
    const a = await start();
    // A alone first: it takes the consumer's turn, so the case below knows which instance consumes.
    await until(consumerSessions, (sessions) => sessions === 1, 'the first instance to take the consumer turn');
    const b = await start();

    const created = await request(
      a.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url: receiverUrl, kinds: ['step.escalated'] },
      ADMIN,
    );
    expect(created.status).toBe(201);
    secret = created.body.secret;
    subscriptionId = created.body.id;
    const listedOnB = await request(b.baseUrl, 'GET', '/v1/admin/webhooks', undefined, ADMIN);
    expect(listedOnB.body.subscriptions.map((each: { id: string }) => each.id)).toEqual([subscriptionId]);

    await incidentsAt(b.baseUrl, RUNTIME_KEY).escalated(`${run}/first`, run, 'pay_invoice');
    const [delivery] = await until(
      async () => received,
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
    expect(received).toHaveLength(1);
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
    await until(consumerSessions, (sessions) => sessions === 1, 'the remaining instance to take the consumer turn');

    const ids = await until(
      async () => idsByOperation(),
      (byOperation) => refs.every((ref) => byOperation.has(ref)),
      'every event delivered after the takeover',
    );
    for (const ref of refs) expect([ref, ids.get(ref)?.size]).toEqual([ref, 1]);
    for (const delivery of received) {
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
});
