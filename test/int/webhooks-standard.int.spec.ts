/**
 * Standard Webhooks against the built service and real receivers on loopback: every delivery is
 * verified by the `standardwebhooks` package (the spec's reference library, not our code); a
 * rotation signs with both secrets during its overlap and with the new one alone after; a receiver
 * answering 410 Gone disables its subscription, which the admin API then shows.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { until } from '../support/until';

const RUNTIME_KEY = 'stdhooks-runtime-key-000001';
const ADMIN_KEY = 'stdhooks-admin-key-00000001';
const KEYS = `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`;
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver that keeps every request and answers with `status`. */
async function receiver(status: number): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, received, server };
}

/** What `standardwebhooks` makes of a delivery under a secret: the parsed body, or why it refused. */
function verifyWith(secret: string, delivery: Received): { ok: true; body: any } | { ok: false; error: string } {
  try {
    return { ok: true, body: new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>) };
  } catch (error) {
    if (error instanceof WebhookVerificationError) return { ok: false, error: error.message };
    throw error;
  }
}

describe('Standard Webhooks', () => {
  let ledger: LedgerProcess;
  const servers: Server[] = [];
  const run = `run_${randomUUID().slice(0, 6)}`;

  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: KEYS,
        LEDGER_WEBHOOK_RETRY_BASE_MS: '100',
        LEDGER_WEBHOOK_RETRY_MAX_MS: '800',
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  it('signs every delivery so standardwebhooks verifies it, across a rotation and after its overlap', async () => {
    const target = await receiver(204);
    servers.push(target.server);
    const created = await request(
      ledger.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url: target.url, kinds: ['step.escalated'] },
      ADMIN,
    );
    expect(created.status).toBe(201);
    const first: string = created.body.secret;
    expect(first).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);

    await ops.escalated(`${run}/one`, run, 'pay_invoice');
    const [one] = await until(
      async () => target.received,
      (all) => all.length >= 1,
      'the first delivery',
    );
    const verified = verifyWith(first, one);
    expect(verified).toMatchObject({
      ok: true,
      body: { type: 'step.escalated', data: { operation_ref: `${run}/one` } },
    });
    expect(one.headers['webhook-id']).toBe(one.headers['recovery-ledger-delivery']);
    expect(verifyWith(`whsec_${Buffer.alloc(24, 7).toString('base64')}`, one)).toEqual({
      ok: false,
      error: 'No matching signature found',
    });
    // A body changed on the way is refused.
    expect(verifyWith(first, { ...one, body: one.body.replace('pay_invoice', 'pay_invoices') })).toMatchObject({
      ok: false,
    });

    // Rotation: during the overlap both secrets sign, so a receiver on either verifies.
    const rotated = await request(
      ledger.baseUrl,
      'POST',
      `/v1/admin/webhooks/${created.body.id}/rotate-secret`,
      { overlap_seconds: 3600 },
      ADMIN,
    );
    expect(rotated.status).toBe(200);
    const second: string = rotated.body.secret;
    expect(second).not.toBe(first);
    const listed = await request(ledger.baseUrl, 'GET', `/v1/admin/webhooks/${created.body.id}`, undefined, ADMIN);
    expect(listed.body).toMatchObject({ active: true, previous_secret_until: rotated.body.previous_secret_until });
    expect(JSON.stringify(listed.body)).not.toContain('whsec_');

    await ops.escalated(`${run}/two`, run, 'pay_invoice');
    const two = (
      await until(
        async () => target.received,
        (all) => all.length >= 2,
        'the delivery during the overlap',
      )
    )[1];
    expect(String(two.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifyWith(first, two)).toMatchObject({ ok: true, body: { data: { operation_ref: `${run}/two` } } });
    expect(verifyWith(second, two)).toMatchObject({ ok: true, body: { data: { operation_ref: `${run}/two` } } });

    // A rotation without overlap: only the newest secret signs from now on.
    const third: string = (
      await request(
        ledger.baseUrl,
        'POST',
        `/v1/admin/webhooks/${created.body.id}/rotate-secret`,
        { overlap_seconds: 0 },
        ADMIN,
      )
    ).body.secret;
    await ops.escalated(`${run}/three`, run, 'pay_invoice');
    const three = (
      await until(
        async () => target.received,
        (all) => all.length >= 3,
        'the delivery after the overlap',
      )
    )[2];
    expect(verifyWith(third, three)).toMatchObject({ ok: true, body: { data: { operation_ref: `${run}/three` } } });
    expect(verifyWith(second, three)).toEqual({ ok: false, error: 'No matching signature found' });
    expect(verifyWith(first, three)).toEqual({ ok: false, error: 'No matching signature found' });

    const badBody = await request(
      ledger.baseUrl,
      'POST',
      `/v1/admin/webhooks/${created.body.id}/rotate-secret`,
      { overlap_seconds: -1 },
      ADMIN,
    );
    expect(badBody.body).toMatchObject({ status: 400, code: 'BAD_REQUEST', field: 'overlap_seconds' });
    const unknown = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks/whk_nope/rotate-secret', {}, ADMIN);
    expect(unknown.body).toMatchObject({ status: 404, code: 'WEBHOOK_NOT_FOUND' });
  }, 60_000);

  it('disables a subscription whose receiver answers 410 Gone, and the admin API says so', async () => {
    const gone = await receiver(410);
    servers.push(gone.server);
    const created = await request(
      ledger.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url: gone.url, kinds: ['step.escalated'] },
      ADMIN,
    );
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
    await ops.escalated(`${run}/gone-1`, run, 'pay_invoice');

    const shown = await until(
      async () =>
        (await request(ledger.baseUrl, 'GET', `/v1/admin/webhooks/${created.body.id}`, undefined, ADMIN)).body,
      (body) => body.active === false,
      'the subscription disabled',
    );
    expect(shown).toMatchObject({
      id: created.body.id,
      active: false,
      disabled_reason: 'the receiver answered 410 Gone',
    });
    expect(Date.parse(shown.disabled_at)).not.toBeNaN();
    expect(verifyWith(created.body.secret, gone.received[0])).toMatchObject({ ok: true });
    const deliveries = await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries?status=failed', undefined, ADMIN);
    expect(deliveries.body.deliveries.find((row: any) => row.subscription_id === created.body.id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      last_status: 410,
    });
    const active = await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, ADMIN);
    expect(active.body.subscriptions.map((row: any) => row.id)).not.toContain(created.body.id);

    // Nothing more is sent to it: a later notification reaches the other subscription only.
    const before = gone.received.length;
    await ops.escalated(`${run}/gone-2`, run, 'pay_invoice');
    await until(
      async () => (await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, ADMIN)).body.deliveries,
      (rows: any[]) => rows.some((row) => row.operation_ref === `${run}/gone-2` && row.status === 'delivered'),
      'the later notification delivered to the first test’s receiver',
    );
    expect(gone.received.length).toBe(before);
  }, 60_000);
});
