/**
 * An admin's handles on webhook deliveries (docs/webhooks.md, "Resend and test events"), against
 * the built service and real receivers on loopback: a delivery shows where it goes, when it is
 * tried next and the network's own reason it failed (ECONNREFUSED, not "fetch failed"); an admin
 * resends one under its own id and sends a signed test event; other roles are refused with 403;
 * links in a payload are absolute from LEDGER_PUBLIC_BASE_URL.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { freePort, startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

const RUNTIME_KEY = 'resend-runtime-key-00000001';
const ADMIN_KEY = 'resend-admin-key-0000000001';
const AUDITOR_KEY = 'resend-auditor-key-00000001';
const KEYS = `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme,${AUDITOR_KEY}:auditor:acme`;
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };
const AUDITOR = { authorization: `Bearer ${AUDITOR_KEY}` };
const PUBLIC_BASE = 'https://ledger.example.com/base';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

async function receiver(port = 0): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, received, server };
}

describe('webhooks: resend, test events, where and why', () => {
  let ledger: LedgerProcess;
  const servers: Server[] = [];
  const run = `run_${randomUUID().slice(0, 6)}`;

  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: KEYS,
        LEDGER_WEBHOOK_RETRY_BASE_MS: '60000',
        LEDGER_WEBHOOK_MAX_ATTEMPTS: '2',
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        LEDGER_PUBLIC_BASE_URL: `${PUBLIC_BASE}/`,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  const deliveries = async (headers = ADMIN) =>
    (await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, headers)).body.deliveries as any[];

  it('a delivery to an address nobody listens on: its URL, the network reason and the next retry; resent once a receiver is there', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/hooks`;
    const created = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url }, ADMIN);
    expect(created.status).toBe(201);
    const secret: string = created.body.secret;
    await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${run}/down`, run, 'pay_invoice');

    const [failed] = await until(
      () => deliveries(),
      (all) => all.some((delivery) => delivery.operation_ref === `${run}/down` && delivery.attempts >= 1),
      'a failed attempt',
    ).then((all) => all.filter((delivery) => delivery.operation_ref === `${run}/down`));
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, url, kind: 'step.escalated' });
    expect(failed.last_error).toMatch(/^ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    expect(Date.parse(failed.next_attempt_at)).toBeGreaterThan(Date.now() + 30_000);
    // Where it goes and why it failed are an admin's to read.
    const seenByAuditor = (await deliveries(AUDITOR)).find((delivery) => delivery.id === failed.id);
    expect(seenByAuditor).not.toHaveProperty('url');
    expect(seenByAuditor).not.toHaveProperty('last_error');

    // The receiver comes up; a resend sends it now, not in a minute, under the same id.
    const target = await receiver(port);
    servers.push(target.server);
    const refused = await request(
      ledger.baseUrl,
      'POST',
      `/v1/admin/webhooks/deliveries/${failed.id}/resend`,
      undefined,
      AUDITOR,
    );
    expect(refused).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });
    const resent = await request(
      ledger.baseUrl,
      'POST',
      `/v1/admin/webhooks/deliveries/${failed.id}/resend`,
      undefined,
      ADMIN,
    );
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ id: failed.id, status: 'pending', url });
    const [got] = await until(
      async () => target.received,
      (all) => all.length >= 1,
      'the resent delivery',
    );
    expect(got.headers['webhook-id']).toBe(failed.id);
    const body = new Webhook(secret).verify(got.body, got.headers as Record<string, string>) as any;
    const ref = encodeURIComponent(`${run}/down`);
    expect(body.links).toEqual({
      operation: `${PUBLIC_BASE}/v1/operations/${ref}`,
      evidence: `${PUBLIC_BASE}/v1/operations/${ref}/evidence`,
      console: `${PUBLIC_BASE}/ui#/operation/${ref}`,
    });
    await until(
      () => deliveries(),
      (all) => all.find((delivery) => delivery.id === failed.id)?.status === 'delivered',
      'the delivery to be delivered',
    );
  });

  it('a test event: signed like any delivery, to one subscription, listed with the others', async () => {
    const target = await receiver();
    servers.push(target.server);
    const created = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url: target.url }, ADMIN);
    const forbidden = await request(ledger.baseUrl, 'POST', `/v1/admin/webhooks/${created.body.id}/test`, {}, AUDITOR);
    expect(forbidden).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });
    const sent = await request(ledger.baseUrl, 'POST', `/v1/admin/webhooks/${created.body.id}/test`, undefined, ADMIN);
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ kind: 'webhook.test', operation_ref: '', status: 'pending', url: target.url });
    const [got] = await until(
      async () => target.received,
      (all) => all.length >= 1,
      'the test event',
    );
    const body = new Webhook(created.body.secret).verify(got.body, got.headers as Record<string, string>) as any;
    expect(body).toMatchObject({
      id: sent.body.id,
      type: 'webhook.test',
      subscription_id: created.body.id,
      links: { console: `${PUBLIC_BASE}/ui#/webhooks` },
    });
    expect(body.data).not.toHaveProperty('operation_ref');
  });

  it('typed refusals: an unknown delivery or subscription, and a subscription that was ended', async () => {
    const missing = await request(
      ledger.baseUrl,
      'POST',
      '/v1/admin/webhooks/deliveries/not-a-delivery/resend',
      undefined,
      ADMIN,
    );
    expect(missing).toMatchObject({ status: 404, body: { code: 'WEBHOOK_DELIVERY_NOT_FOUND' } });
    expect(missing.contentType).toMatch(/^application\/problem\+json/);
    const noSubscription = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks/nope/test', undefined, ADMIN);
    expect(noSubscription).toMatchObject({ status: 404, body: { code: 'WEBHOOK_NOT_FOUND' } });

    const target = await receiver();
    servers.push(target.server);
    const created = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url: target.url }, ADMIN);
    const test = await request(ledger.baseUrl, 'POST', `/v1/admin/webhooks/${created.body.id}/test`, undefined, ADMIN);
    expect(
      (await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${created.body.id}`, undefined, ADMIN)).status,
    ).toBe(200);
    const ended = await request(ledger.baseUrl, 'POST', `/v1/admin/webhooks/${created.body.id}/test`, undefined, ADMIN);
    expect(ended).toMatchObject({ status: 409, body: { code: 'WEBHOOK_SUBSCRIPTION_INACTIVE' } });
    const resendEnded = await request(
      ledger.baseUrl,
      'POST',
      `/v1/admin/webhooks/deliveries/${test.body.id}/resend`,
      undefined,
      ADMIN,
    );
    expect(resendEnded).toMatchObject({ status: 409, body: { code: 'WEBHOOK_SUBSCRIPTION_INACTIVE' } });
  });
});
