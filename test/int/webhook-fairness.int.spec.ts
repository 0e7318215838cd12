/**
 * Webhook deliveries are fair across tenants (docs/webhooks.md, "Delivery"): one tenant's receivers
 * that never answer hold at most its share of the delivery slots, so another tenant's notification
 * goes out while they hang; and a tenant has at most the documented number of subscriptions.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { until } from '../support/until';

jest.setTimeout(90_000);

const ALPHA = 'fairness-alpha-admin-key-0001';
const BETA = 'fairness-beta-admin-key-0001';
const DEAD_RECEIVERS = 16;

interface Receiver {
  url: string;
  /** Requests received; a silent receiver holds every one of them open. */
  received: number;
  close(): Promise<void>;
}

async function startReceiver(answer: boolean): Promise<Receiver> {
  const held: ServerResponse[] = [];
  const receiver: Receiver = { url: '', received: 0, close: async () => undefined };
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    receiver.received += 1;
    if (answer) response.writeHead(204).end();
    else held.push(response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () => {
    for (const response of held) response.destroy();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return receiver;
}

describe('webhook deliveries across tenants', () => {
  let ledger: InProcessLedger;
  let silent: Receiver;
  let live: Receiver;

  beforeAll(async () => {
    [silent, live] = await Promise.all([startReceiver(false), startReceiver(true)]);
    ledger = await startLedgerInProcess({
      env: {
        LEDGER_API_KEYS: `${ALPHA}:admin:alpha,${BETA}:admin:beta`,
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        // Longer than the test: a held POST of the silent receiver never ends within it.
        LEDGER_WEBHOOK_TIMEOUT_MS: '120000',
        LEDGER_RATE_LIMIT_PER_MINUTE: '1000000',
      },
    });
  });
  afterAll(async () => {
    await silent?.close();
    await ledger?.stop();
    await live?.close();
    ledger?.cleanup();
  });

  const call = async (key: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${ledger.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const subscribe = (key: string, url: string) =>
    call(key, 'POST', '/v1/admin/webhooks', { url, kinds: ['step.escalated'] });

  it("one tenant's receivers that never answer do not hold back another tenant's delivery", async () => {
    for (let index = 0; index < DEAD_RECEIVERS; index++) {
      const created = await subscribe(ALPHA, `${silent.url}/hooks/${index}`);
      expect(created.status).toBe(201);
      expect((await call(ALPHA, 'POST', `/v1/admin/webhooks/${created.body.id}/test`)).status).toBe(202);
    }
    // The silent tenant's first POST is held: the dispatcher is busy with it.
    await until(
      async () => silent.received,
      (received) => received >= 1,
      'the silent receivers to hold a delivery',
    );
    const beta = await subscribe(BETA, `${live.url}/hooks`);
    expect((await call(BETA, 'POST', `/v1/admin/webhooks/${beta.body.id}/test`)).status).toBe(202);
    await until(
      async () => (await call(BETA, 'GET', '/v1/webhooks/deliveries')).body.counts,
      (counts) => counts.delivered === 1,
      "the other tenant's delivery, while the silent receivers hold theirs",
    );
    // The silent tenant holds its share of the slots (4), never more, however many it has due.
    const held = await until(
      async () => silent.received,
      (received) => received >= 4,
      "the silent tenant's share of the slots",
    );
    expect({ held, of: DEAD_RECEIVERS }).toEqual({ held: 4, of: DEAD_RECEIVERS });
  });

  it('refuses a subscription past the per-tenant cap with a typed problem', async () => {
    const listed = await call(ALPHA, 'GET', '/v1/admin/webhooks');
    const existing = (listed.body.subscriptions as unknown[]).length;
    const answers: number[] = [];
    for (let index = existing; index < 25; index++)
      answers.push((await subscribe(ALPHA, `${silent.url}/more/${index}`)).status);
    const refused = await subscribe(ALPHA, `${silent.url}/one-too-many`);
    expect({ created: answers.every((status) => status === 201), refused }).toEqual({
      created: true,
      refused: {
        status: 409,
        body: expect.objectContaining({ code: 'WEBHOOK_SUBSCRIPTION_LIMIT', status: 409 }),
      },
    });
    // Another tenant is not counted against it.
    expect((await subscribe(BETA, `${live.url}/hooks/second`)).status).toBe(201);
  });
});
