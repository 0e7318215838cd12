/**
 * What a webhook receiver, or whatever answers at its address, cannot do to the service, and what the
 * service keeps of a subscription (docs/webhooks.md): a huge answer is not read; a name that resolves
 * to a private address is not reached and only admins see why; signing secrets are not in the
 * webhook file when a key is set. The built service as a real process, real receivers on loopback.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { isPrivateAddress } from '../../src/webhooks/webhook-address';
import { verifySignature } from '../../src/webhooks/webhook-signature';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

const RUNTIME_KEY = 'webhook-safety-runtime-001';
const ADMIN_KEY = 'webhook-safety-admin-00001';
const KEYS = `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`;
const admin = { authorization: `Bearer ${ADMIN_KEY}` };
const runtime = { authorization: `Bearer ${RUNTIME_KEY}` };
const FAST_RETRIES = { LEDGER_WEBHOOK_RETRY_BASE_MS: '100', LEDGER_WEBHOOK_RETRY_MAX_MS: '400' };
const MiB = 1024 * 1024;

async function listen(server: Server, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as AddressInfo).port;
}

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

async function subscribe(ledger: LedgerProcess, url: string): Promise<{ id: string; secret: string }> {
  const answer = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url, kinds: ['step.escalated'] }, admin);
  if (answer.status !== 201) throw new Error(`subscribe: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

const deliveries = (ledger: LedgerProcess, headers: Record<string, string>) =>
  request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, headers).then((answer) => answer.body);

/** Peak resident memory of a process, from the kernel (`VmHWM`), in bytes. */
function peakRss(pid: number): number {
  const line = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(line?.[1]) * 1024;
}

describe('a receiver that answers a huge body', () => {
  const LIMIT = 200 * MiB;
  const CHUNK = Buffer.alloc(64 * 1024, 'x');
  let ledger: LedgerProcess;
  let server: Server;
  let url: string;
  /** Bytes of the answer written into the connection, and whether the service closed it. */
  const answer = { sent: 0, closed: false };

  beforeAll(async () => {
    // Generated lazily, a chunk at a time as the connection takes it; stops when it is closed.
    server = createServer((req, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.once('close', () => (answer.closed = true));
        const pump = () => {
          while (answer.sent < LIMIT && !res.destroyed) {
            answer.sent += CHUNK.length;
            if (!res.write(CHUNK)) return void res.once('drain', pump);
          }
          if (!res.destroyed) res.end();
        };
        pump();
      });
    });
    url = `http://127.0.0.1:${await listen(server)}/hooks`;
    // A timeout long enough for a service that reads the whole answer to finish reading it.
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: KEYS,
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        LEDGER_WEBHOOK_TIMEOUT_MS: '60000',
        ...FAST_RETRIES,
      },
    });
  }, 60_000);

  afterAll(async () => {
    server.closeAllConnections();
    await ledger?.stop();
    ledger?.cleanup();
    await close(server);
  });

  it('reads a few KiB of it, closes the connection, records the delivery, and the service stays small', async () => {
    await subscribe(ledger, url);
    const before = peakRss(ledger.child.pid as number);
    const run = `run_${randomUUID().slice(0, 6)}`;
    await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${run}/big`, run, 'pay_invoice');
    const seen = await until(
      () => deliveries(ledger, admin),
      (body) => body.counts.delivered === 1,
      'the delivery recorded',
      60_000,
    );
    expect(seen.deliveries[0]).toMatchObject({ status: 'delivered', last_status: 200, attempts: 1 });
    await until(
      async () => answer.closed,
      (closed) => closed,
      'the service to close the answer',
    );
    const grew = peakRss(ledger.child.pid as number) - before;
    process.stdout.write(
      `webhook huge answer: ${(answer.sent / MiB).toFixed(1)} MiB of ${LIMIT / MiB} MiB written before the service closed the connection; peak RSS grew ${(grew / MiB).toFixed(1)} MiB\n`,
    );
    // Socket buffers on both sides hold a few MiB at most; reading the answer whole sends all 200.
    expect(answer.sent).toBeLessThan(32 * MiB);
    // Generous: a safety bound, not a measurement (reading the answer whole costs more than 200 MiB).
    expect(grew).toBeLessThan(128 * MiB);
  }, 90_000);
});

describe('a receiver whose name resolves to a private address', () => {
  let ledger: LedgerProcess;
  let server: Server;
  let reached = 0;
  let address: string;
  let url: string;

  beforeAll(async () => {
    // This machine's own name: a name, not an address, that resolves to one of its own addresses.
    ({ address } = await lookup(hostname()));
    server = createServer((req, res) => {
      reached += 1;
      req.resume();
      res.writeHead(204).end();
    });
    url = `http://${hostname()}:${await listen(server, address)}/hooks`;
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_WEBHOOK_ALLOW_PRIVATE: '', ...FAST_RETRIES } });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
    await close(server);
  });

  it('is not reached at delivery time; why is shown to admins only', async () => {
    expect([hostname(), address, isPrivateAddress(address)]).toEqual([hostname(), address, true]);
    // A name is accepted when subscribing: it is checked each time it is resolved.
    await subscribe(ledger, url);
    const run = `run_${randomUUID().slice(0, 6)}`;
    await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${run}/private`, run, 'pay_invoice');
    const seen = await until(
      () => deliveries(ledger, admin),
      (body) => body.deliveries[0]?.attempts >= 3,
      'three attempts',
      30_000,
    );
    expect(seen.deliveries[0]).toMatchObject({
      status: 'pending',
      last_error: expect.stringContaining(`resolves to ${address}, a loopback, link-local or private address`),
    });
    expect(reached).toBe(0);
    const read = await deliveries(ledger, runtime);
    expect(read.deliveries[0]).toMatchObject({ status: 'pending', attempts: expect.any(Number) });
    expect(read.deliveries[0]).not.toHaveProperty('last_error');
  }, 60_000);
});

describe('signing secrets at rest', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ledger-webhook-secrets-'));
  const key = randomBytes(32).toString('hex');
  const received: Array<{ url: string; header: string; body: string }> = [];
  let server: Server;
  let base: string;
  let ledger: LedgerProcess | undefined;
  const start = (secretKey: string) =>
    startLedger({
      dataDir,
      env: {
        LEDGER_API_KEYS: KEYS,
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        LEDGER_WEBHOOK_SECRET_KEY: secretKey,
        ...FAST_RETRIES,
      },
    });
  /** Every byte of the webhook file and its WAL. */
  const fileBytes = () =>
    Buffer.concat(
      ['webhooks.sqlite', 'webhooks.sqlite-wal']
        .map((name) => join(dataDir, name))
        .filter(existsSync)
        .map((file) => readFileSync(file)),
    );

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({
          url: String(req.url),
          header: String(req.headers['recovery-ledger-signature']),
          body: Buffer.concat(chunks).toString('utf8'),
        });
        res.writeHead(204).end();
      });
    });
    base = `http://127.0.0.1:${await listen(server)}`;
  });

  afterAll(async () => {
    await ledger?.stop();
    await close(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('are plain without a key (said at start), wrapped when one is set later, and the service refuses to start without it', async () => {
    ledger = await start('');
    expect(ledger.output()).toContain('webhook signing secrets are stored in plain text');
    const before = await subscribe(ledger, `${base}/before`);
    await ledger.stop();
    // The check below can see a secret: without a key, here it is.
    expect(fileBytes().includes(before.secret)).toBe(true);

    ledger = await start(key);
    expect(ledger.output()).not.toContain('stored in plain text');
    const after = await subscribe(ledger, `${base}/after`);
    const run = `run_${randomUUID().slice(0, 6)}`;
    await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${run}/wrapped`, run, 'pay_invoice');
    await until(
      async () => received.length,
      (count) => count >= 2,
      'both deliveries',
    );
    for (const [path, secret] of [
      ['/before', before.secret],
      ['/after', after.secret],
    ]) {
      const item = received.find((candidate) => candidate.url === path);
      expect([path, verifySignature(item?.header, item?.body ?? '', secret).ok]).toEqual([path, true]);
    }
    for (const bytes of [fileBytes()]) {
      expect([bytes.includes(before.secret), bytes.includes(after.secret), bytes.includes('whsec_')]).toEqual([
        false,
        false,
        false,
      ]);
    }
    await ledger.stop();
    const stopped = fileBytes();
    expect([stopped.includes(before.secret), stopped.includes(after.secret), stopped.includes('whsec_')]).toEqual([
      false,
      false,
      false,
    ]);
    ledger = undefined;

    await expect(start('')).rejects.toThrow(
      /holds 2 webhook signing secret\(s\) wrapped with LEDGER_WEBHOOK_SECRET_KEY, which is not set/,
    );
    await expect(start(randomBytes(32).toString('hex'))).rejects.toThrow(
      /LEDGER_WEBHOOK_SECRET_KEY does not open 2 webhook signing secret\(s\)/,
    );
    await expect(start('not-a-key')).rejects.toThrow(/LEDGER_WEBHOOK_SECRET_KEY must be 32 bytes/);

    // Ending the subscriptions drops their secrets: the key can then be removed.
    ledger = await start(key);
    for (const { id } of [before, after])
      expect((await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${id}`, undefined, admin)).status).toBe(200);
    await ledger.stop();
    ledger = await start('');
    expect(ledger.output()).toContain('webhook signing secrets are stored in plain text');
  }, 120_000);
});
