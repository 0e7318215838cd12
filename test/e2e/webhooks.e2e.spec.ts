/**
 * Webhooks from the built service to real receivers on loopback, one describe block per subject:
 * delivery and retries across restarts, an admin's resend and test events, and the safety checks
 * on where a webhook may go. Each block keeps its own header, constants and hooks.
 */

import { execFileSync } from 'node:child_process';
import { randomUUID, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir, hostname } from 'node:os';
import { join } from 'node:path';
import { signatureHeader, verifySignature } from '../../src/webhooks/webhook-signature';
import { request } from '../support/http';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess, freePort } from '../support/ledger-process';
import { Webhook } from 'standardwebhooks';
import { until } from '../support/until';
import { lookup } from 'node:dns/promises';
import { isPrivateAddress } from '../../src/webhooks/webhook-address';

describe('delivery', () => {
  /**
   * Webhooks against a real receiving HTTP server and the built service as a real process: every
   * notification kind arrives signed; a receiver that is down for a while, and a service killed with
   * SIGKILL in the middle, lose nothing; a tampered body fails verification.
   */
  const RUNTIME_KEY = 'webhook-runtime-key-0000001';
  const ADMIN_KEY = 'webhook-admin-key-00000001';
  const KEYS = `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`;
  // Short backoff so a test waits seconds, not minutes; the schedule itself is the same.
  const FAST_RETRIES = { LEDGER_WEBHOOK_RETRY_BASE_MS: '100', LEDGER_WEBHOOK_RETRY_MAX_MS: '800' };
  // The receivers of these tests are on loopback, which the service refuses unless told otherwise.
  const LOOPBACK_RECEIVERS = { LEDGER_WEBHOOK_ALLOW_PRIVATE: '1' };

  interface Received {
    at: number;
    headers: IncomingHttpHeaders;
    body: string;
    json: any;
  }

  class Receiver {
    readonly received: Received[] = [];
    /** While down, every connection is dropped without an answer, as a crashed receiver would. */
    down = false;
    refusedWhileDown = 0;
    private server: Server | undefined;
    url = '';

    async start(): Promise<void> {
      this.server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          if (this.down) {
            this.refusedWhileDown += 1;
            req.socket.destroy();
            return;
          }
          const body = Buffer.concat(chunks).toString('utf8');
          this.received.push({ at: Date.now(), headers: req.headers, body, json: JSON.parse(body) });
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
      this.url = `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}/hooks`;
    }

    stop(): Promise<void> {
      return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    }

    distinct(): Map<string, Received> {
      return new Map(this.received.map((item) => [String(item.headers['recovery-ledger-delivery']), item]));
    }
  }

  async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = probe();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async function subscribe(
    ledger: LedgerProcess,
    body: Record<string, unknown>,
  ): Promise<{ id: string; secret: string }> {
    const answer = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', body, {
      authorization: `Bearer ${ADMIN_KEY}`,
    });
    if (answer.status !== 201) throw new Error(`subscribe: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  describe('webhooks, every kind, signed', () => {
    let ledger: LedgerProcess;
    const receiver = new Receiver();
    let secret: string;
    const run = `run_${randomUUID().slice(0, 6)}`;

    beforeAll(async () => {
      await receiver.start();
      ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, ...FAST_RETRIES, ...LOOPBACK_RECEIVERS } });
      ({ secret } = await subscribe(ledger, { url: receiver.url, unknown_after_ms: 1500, premature_refusals: 3 }));
    }, 60_000);

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
      await receiver.stop();
    });

    it('delivers step escalated, approval requested, unknown outcome unresolved, and repeated premature lookups', async () => {
      const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
      await ops.awaitingApproval(`${run}/approval`, run, 'refund');
      await ops.escalated(`${run}/escalated`, run, 'pay_invoice');
      const escalatedAt = Date.now();
      // Stays unknown past the subscription's 1.5 s: notified. The other is resolved in time: not.
      await ops.verifying(`${run}/unknown`, run, 'create_invoice');
      await ops.verifying(`${run}/resolved`, run, 'create_invoice');
      await ops.submit(`${run}/resolved`, 'VerificationRecorded', {
        outcome: 'found_committed',
        checked_at: new Date().toISOString(),
        evidence_ref: 'inv_9',
      });
      // Three lookups inside the consistency window, each refused.
      await ops.verifying(`${run}/premature`, run, 'create_invoice', { consistency_window_ms: 600_000 });
      for (let i = 0; i < 3; i++)
        expect((await ops.prematureLookup(`${run}/premature`)).body.code).toBe('VERIFICATION_PREMATURE');

      // The premature lookups' step stays unknown past 1.5 s as well: five notifications in all.
      const kinds = await until('five notifications', () => {
        const all = [...receiver.distinct().values()];
        return all.length >= 5
          ? new Map(all.map((item) => [`${item.json.type} ${item.json.data.operation_ref.split('/')[1]}`, item]))
          : undefined;
      });
      expect([...kinds.keys()].sort()).toEqual([
        'approval.requested approval',
        'step.escalated escalated',
        'unknown_outcome.unresolved premature',
        'unknown_outcome.unresolved unknown',
        'verification.premature_repeated premature',
      ]);
      expect(kinds.get('step.escalated escalated')?.json.data).toMatchObject({
        operation_ref: `${run}/escalated`,
        run_id: run,
        tool: 'pay_invoice',
        status: 'escalated',
        reason: 'INVOICE_ALREADY_PAID',
      });
      expect(kinds.get('approval.requested approval')?.json.data).toMatchObject({
        operation_ref: `${run}/approval`,
        status: 'awaiting_approval',
        reason: 'MISSING_APPROVAL',
      });
      expect(kinds.get('unknown_outcome.unresolved unknown')?.json.data).toMatchObject({
        operation_ref: `${run}/unknown`,
        status: 'verifying',
      });
      expect(kinds.get('unknown_outcome.unresolved unknown')?.json.data.unresolved_ms).toBeGreaterThanOrEqual(1500);
      expect(kinds.get('verification.premature_repeated premature')?.json.data).toMatchObject({
        operation_ref: `${run}/premature`,
        refusals: 3,
      });
      expect(kinds.get('step.escalated escalated')?.json.links.console).toBe(
        `/ui#/operation/${encodeURIComponent(`${run}/escalated`)}`,
      );
      process.stdout.write(
        `webhook latency: step.escalated received ${(kinds.get('step.escalated escalated') as Received).at - escalatedAt} ms after the escalating envelope was acknowledged\n`,
      );
      // The resolved lookup's watch came due too, and found nothing to tell.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(
        [...receiver.distinct().values()].filter((item) => item.json.data.operation_ref === `${run}/resolved`),
      ).toEqual([]);

      for (const item of receiver.received) {
        expect(item.headers['recovery-ledger-event']).toBe(item.json.type);
        expect(item.headers['recovery-ledger-delivery']).toBe(item.json.id);
        expect(verifySignature(String(item.headers['recovery-ledger-signature']), item.body, secret)).toEqual({
          ok: true,
          timestamp: expect.any(Number),
        });
      }
    }, 60_000);

    it('a tampered body, a wrong secret or an old timestamp fails verification', () => {
      const item = receiver.received[0];
      const header = String(item.headers['recovery-ledger-signature']);
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      const tampered = item.body.replace(item.json.data.operation_ref, `${run}/other`);
      expect(tampered).not.toBe(item.body);
      expect(verifySignature(header, tampered, secret)).toEqual({ ok: false, reason: 'no_match' });
      expect(verifySignature(header, item.body, `${secret}x`)).toEqual({ ok: false, reason: 'no_match' });
      const t = Number(/t=(\d+)/.exec(header)?.[1]);
      expect(verifySignature(header, item.body, secret, { nowSeconds: t + 301 })).toEqual({
        ok: false,
        reason: 'too_old',
      });
      expect(verifySignature(header, item.body, secret, { nowSeconds: t + 299 }).ok).toBe(true);
    });

    it('the Node and Python snippets of docs/webhooks.md accept real deliveries and refuse tampered, old and non-ASCII signatures', () => {
      const doc = readFileSync(join(__dirname, '../../docs/webhooks.md'), 'utf8');
      const snippet = (language: string) => {
        const blocks = [...doc.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))]
          .map((match) => match[1])
          .filter((code) => /verify_?[lL]edger_?[wW]ebhook/.test(code));
        expect(blocks).toHaveLength(1);
        return blocks[0];
      };
      const item = receiver.received[0];
      const header = String(item.headers['recovery-ledger-signature']);
      const t = Number(/t=(\d+)/.exec(header)?.[1]);
      const hex = /v1=([0-9a-f]{64})/.exec(header)?.[1] as string;
      const cases: Array<{ what: string; header: string; body: string; secret: string; expected: boolean }> = [
        ...receiver.received.map((real) => ({
          what: `real ${real.json.type}`,
          header: String(real.headers['recovery-ledger-signature']),
          body: real.body,
          secret,
          expected: true,
        })),
        {
          what: 'tampered body',
          header,
          body: item.body.replace(item.json.data.operation_ref, `${run}/other`),
          secret,
          expected: false,
        },
        { what: 'wrong secret', header, body: item.body, secret: `${secret}x`, expected: false },
        {
          what: 'timestamp 301 s old',
          header: signatureHeader(secret, item.body, Math.floor(Date.now() / 1000) - 301),
          body: item.body,
          secret,
          expected: false,
        },
        { what: 'non-ASCII v1', header: `t=${t},v1=é${hex.slice(1)}`, body: item.body, secret, expected: false },
        {
          what: 'non-ASCII digits as v1',
          header: `t=${t},v1=${'٣'.repeat(64)}`,
          body: item.body,
          secret,
          expected: false,
        },
        { what: 'v1 too short', header: `t=${t},v1=${hex.slice(1)}`, body: item.body, secret, expected: false },
        {
          what: 'non-ASCII digits as t',
          header: `t=${String(t).replace(/\d/g, (digit) => String.fromCharCode(0x660 + Number(digit)))},v1=${hex}`,
          body: item.body,
          secret,
          expected: false,
        },
        {
          what: 'a bad v1 before the good one',
          header: `t=${t},v1=ü${hex.slice(1)},v1=${hex}`,
          body: item.body,
          secret,
          expected: true,
        },
      ];
      const dir = mkdtempSync(join(tmpdir(), 'ledger-webhook-snippets-'));
      try {
        writeFileSync(join(dir, 'cases.json'), JSON.stringify(cases));
        writeFileSync(
          join(dir, 'verify.js'),
          `${snippet('js')}\nconst cases = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));\n` +
            `console.log(JSON.stringify(cases.map((c) => verifyLedgerWebhook(c.header, Buffer.from(c.body, 'utf8'), c.secret))));\n`,
        );
        writeFileSync(
          join(dir, 'verify.py'),
          `${snippet('python')}\nimport json, sys\ncases = json.load(open(sys.argv[1], encoding="utf-8"))\n` +
            `print(json.dumps([verify_ledger_webhook(c["header"], c["body"].encode("utf-8"), c["secret"]) for c in cases]))\n`,
        );
        const expected = cases.map((c) => [c.what, c.expected]);
        for (const [program, file] of [
          [process.execPath, 'verify.js'],
          ['python3', 'verify.py'],
        ]) {
          const results = JSON.parse(
            execFileSync(program, [join(dir, file), join(dir, 'cases.json')], { encoding: 'utf8' }),
          ) as boolean[];
          expect([file, cases.map((c, index) => [c.what, results[index]])]).toEqual([file, expected]);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('shows deliveries per status to the tenant and attempts on /metrics', async () => {
      const answer = await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, {
        authorization: `Bearer ${RUNTIME_KEY}`,
      });
      expect(answer.status).toBe(200);
      expect(answer.body.counts).toEqual({ pending: 0, delivered: 5, failed: 0 });
      expect(answer.body.deliveries[0]).not.toHaveProperty('body');
      const metrics = await request(ledger.baseUrl, 'GET', '/metrics', undefined, {
        authorization: `Bearer ${ADMIN_KEY}`,
      });
      expect(metrics.body).toMatch(
        /ledger_webhook_deliveries\{tenant="acme",kind="step.escalated",status="delivered"\} 1/,
      );
      expect(metrics.body).toMatch(
        /ledger_webhook_attempts_total\{tenant="acme",kind="approval.requested",outcome="delivered"\} 1/,
      );
    });
  });

  describe('webhook subscriptions, configured by an admin', () => {
    let ledger: LedgerProcess;
    const admin = { authorization: `Bearer ${ADMIN_KEY}` };

    beforeAll(async () => {
      // The defaults: no private receivers.
      ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_WEBHOOK_ALLOW_PRIVATE: '' } });
    }, 60_000);

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    it('refuses a subscription that is not its shape, naming the field, and stores nothing', async () => {
      for (const [body, field] of [
        [{ url: 'ftp://example.test/hook' }, 'url'],
        [{ url: 'http://user:pass@127.0.0.1/hook' }, 'url'],
        [{ url: 'not a url' }, 'url'],
        [{ url: 'http://127.0.0.1/hook', kinds: ['step.exploded'] }, 'kinds'],
        [{ url: 'http://127.0.0.1/hook', unknown_after_ms: -5 }, 'unknown_after_ms'],
        [{ url: 'http://127.0.0.1/hook', premature_refusals: 0 }, 'premature_refusals'],
        [{ url: 'http://127.0.0.1/hook', secret: 'mine' }, 'secret'],
      ] as const) {
        const answer = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', body, admin);
        expect([answer.status, answer.body.code, answer.body.field]).toEqual([400, 'BAD_REQUEST', field]);
      }
      expect((await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, admin)).body).toEqual({
        subscriptions: [],
      });
    });

    it('refuses a URL with a credential in its query, by name or by what the secret scanner finds, and stores nothing', async () => {
      const huggingFace = (SECRET_CORPUS.find(([what]) => what === 'huggingface token') as [string, string, string])[1];
      for (const url of [
        'https://hooks.example.com/ledger?token=7f3a9c2e',
        'https://hooks.example.com/ledger?key=7f3a9c2e',
        'https://hooks.example.com/ledger?sig=7f3a9c2e',
        'https://hooks.example.com/ledger?tenant=acme&api_key=7f3a9c2e',
        'https://hooks.example.com/ledger?X-Amz-Signature=7f3a9c2e',
        'https://hooks.example.com/ledger#access_token=7f3a9c2e',
        // A neutral name, a value only secretlint's rules recognise.
        `https://hooks.example.com/ledger?x=${huggingFace}`,
      ]) {
        const answer = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url }, admin);
        expect([url, answer.status, answer.body.code, answer.body.field, answer.body.detail]).toEqual([
          url,
          400,
          'BAD_REQUEST',
          'url',
          expect.stringMatching(/must not carry a credential/),
        ]);
      }
      expect((await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, admin)).body).toEqual({
        subscriptions: [],
      });
      const plain = await request(
        ledger.baseUrl,
        'POST',
        '/v1/admin/webhooks',
        { url: 'https://hooks.example.com/ledger?tenant=acme&v=2' },
        admin,
      );
      expect(plain.status).toBe(201);
      await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${plain.body.id}`, undefined, admin);
    });

    it('refuses loopback, link-local, private and metadata addresses by default, and stores nothing', async () => {
      for (const url of [
        'http://127.0.0.1:6379/hook',
        'http://localhost:3000/hook',
        'http://[::1]/hook',
        'http://0.0.0.0/hook',
        'http://2130706433/hook',
        'http://10.0.0.5/hook',
        'http://172.16.4.4/hook',
        'http://192.168.1.1/hook',
        'http://169.254.169.254/latest/meta-data/',
        'http://[fd00:ec2::254]/hook',
        'http://[fe80::1]/hook',
        'http://[::ffff:127.0.0.1]/hook',
      ]) {
        const answer = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url }, admin);
        expect([url, answer.status, answer.body.code, answer.body.field, answer.body.detail]).toEqual([
          url,
          400,
          'BAD_REQUEST',
          'url',
          expect.stringMatching(/LEDGER_WEBHOOK_ALLOW_PRIVATE=1/),
        ]);
      }
      expect((await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, admin)).body).toEqual({
        subscriptions: [],
      });
    });

    it('shows the secret once, lists without it, and ends a subscription', async () => {
      const made = await request(
        ledger.baseUrl,
        'POST',
        '/v1/admin/webhooks',
        { url: 'https://hooks.example.com/ledger', kinds: ['step.escalated'] },
        admin,
      );
      expect(made.status).toBe(201);
      expect(made.body).toMatchObject({
        id: expect.stringMatching(/^whk_/),
        secret: expect.stringMatching(/^whsec_/),
        kinds: ['step.escalated'],
        unknown_after_ms: 900_000,
        premature_refusals: 3,
        active: true,
      });
      const listed = await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, admin);
      expect(listed.body.subscriptions).toEqual([expect.not.objectContaining({ secret: expect.anything() })]);
      expect(JSON.stringify(listed.body)).not.toContain(made.body.secret);
      const ended = await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${made.body.id}`, undefined, admin);
      expect([ended.status, ended.body.active]).toEqual([200, false]);
      const again = await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${made.body.id}`, undefined, admin);
      expect([again.status, again.body.code]).toEqual([404, 'WEBHOOK_NOT_FOUND']);
      expect((await request(ledger.baseUrl, 'GET', '/v1/admin/webhooks', undefined, admin)).body).toEqual({
        subscriptions: [],
      });
    });
  });

  describe('webhooks when the receiver is down and the service is killed', () => {
    const receiver = new Receiver();
    let ledger: LedgerProcess;
    const run = `run_${randomUUID().slice(0, 6)}`;

    beforeAll(async () => {
      await receiver.start();
      ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, ...FAST_RETRIES, ...LOOPBACK_RECEIVERS } });
    }, 60_000);

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
      await receiver.stop();
    });

    it('delivers every notification once the receiver is back, none lost across a SIGKILL', async () => {
      const { secret } = await subscribe(ledger, {
        url: receiver.url,
        kinds: ['step.escalated', 'approval.requested'],
      });
      receiver.down = true;
      let ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
      const expected: string[] = [];
      for (let i = 0; i < 10; i++) {
        const ref = `${run}/before_${i}`;
        await (i % 2 === 0 ? ops.escalated(ref, run, 'pay_invoice') : ops.awaitingApproval(ref, run, 'refund'));
        expected.push(ref);
      }
      // The receiver refuses for a while: attempts fail and are retried.
      await until('failed attempts', () => receiver.refusedWhileDown >= 20);
      // Facts acknowledged just before the crash: the consumer may not have read them yet.
      for (let i = 0; i < 5; i++) {
        const ref = `${run}/at_kill_${i}`;
        await ops.escalated(ref, run, 'pay_invoice');
        expected.push(ref);
      }
      await ledger.kill();
      ledger = await ledger.restart();
      ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
      for (let i = 0; i < 5; i++) {
        const ref = `${run}/after_${i}`;
        await ops.awaitingApproval(ref, run, 'refund');
        expected.push(ref);
      }
      await until('failed attempts after the restart', () => receiver.refusedWhileDown >= 40);
      const upAt = Date.now();
      receiver.down = false;
      const delivered = await until('every notification', () => {
        const refs = new Set([...receiver.distinct().values()].map((item) => item.json.data.operation_ref));
        return expected.every((ref) => refs.has(ref)) ? refs : undefined;
      });
      const allInMs = Date.now() - upAt;
      expect(delivered.size).toBe(expected.length);
      // One delivery id per notification, whatever was repeated.
      expect(receiver.distinct().size).toBe(expected.length);
      for (const item of receiver.received)
        expect(verifySignature(String(item.headers['recovery-ledger-signature']), item.body, secret).ok).toBe(true);
      const answer = await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries?limit=100', undefined, {
        authorization: `Bearer ${RUNTIME_KEY}`,
      });
      expect(answer.body.counts).toEqual({ pending: 0, delivered: expected.length, failed: 0 });
      const attempts = answer.body.deliveries.map((delivery: { attempts: number }) => delivery.attempts);
      // The figures docs/webhooks.md reports, from this run.
      process.stdout.write(
        `webhook delivery: ${expected.length} notifications, ${receiver.refusedWhileDown} refused while down, ` +
          `${receiver.received.length} received (${receiver.received.length - receiver.distinct().size} repeats), ` +
          `all in ${allInMs} ms after the receiver came back, attempts per delivery ${Math.min(...attempts)}..${Math.max(...attempts)}\n`,
      );
    }, 120_000);
  });
});

describe('resend, test events, where and why', () => {
  /**
   * An admin's handles on webhook deliveries (docs/webhooks.md, "Resend and test events"), against
   * the built service and real receivers on loopback: a delivery shows where it goes, when it is
   * tried next and the network's own reason it failed (ECONNREFUSED, not "fetch failed"); an admin
   * resends one under its own id and sends a signed test event; other roles are refused with 403;
   * links in a payload are absolute from LEDGER_PUBLIC_BASE_URL.
   */
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
      const forbidden = await request(
        ledger.baseUrl,
        'POST',
        `/v1/admin/webhooks/${created.body.id}/test`,
        {},
        AUDITOR,
      );
      expect(forbidden).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });
      const sent = await request(
        ledger.baseUrl,
        'POST',
        `/v1/admin/webhooks/${created.body.id}/test`,
        undefined,
        ADMIN,
      );
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
      const test = await request(
        ledger.baseUrl,
        'POST',
        `/v1/admin/webhooks/${created.body.id}/test`,
        undefined,
        ADMIN,
      );
      expect(
        (await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${created.body.id}`, undefined, ADMIN)).status,
      ).toBe(200);
      const ended = await request(
        ledger.baseUrl,
        'POST',
        `/v1/admin/webhooks/${created.body.id}/test`,
        undefined,
        ADMIN,
      );
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
});

describe('safety', () => {
  /**
   * What a webhook receiver, or whatever answers at its address, cannot do to the service, and what the
   * service keeps of a subscription (docs/webhooks.md): a huge answer is not read; a name that resolves
   * to a private address is not reached and only admins see why; signing secrets are not in the
   * webhook file when a key is set. The built service as a real process, real receivers on loopback.
   */
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
    const answer = await request(
      ledger.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      { url, kinds: ['step.escalated'] },
      admin,
    );
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
        expect((await request(ledger.baseUrl, 'DELETE', `/v1/admin/webhooks/${id}`, undefined, admin)).status).toBe(
          200,
        );
      await ledger.stop();
      ledger = await start('');
      expect(ledger.output()).toContain('webhook signing secrets are stored in plain text');
    }, 120_000);
  });
});
