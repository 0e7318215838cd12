/**
 * The read side of the built service, one describe block per subject: the read endpoints over HTTP,
 * and the projection engine in its worker thread (which a test kills). Each block keeps its own
 * header, constants and hooks.
 */

import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { committedPosition, request, submitFact, fact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { envelopes } from '../unit/projections/support/ledger-scenario';
import { setTimeout as sleep } from 'node:timers/promises';
import { fork, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { until } from '../support/until';

describe('the read endpoints', () => {
  /**
   * The read endpoints over real HTTP against the built server (docs/contract.md §9): evidence, run summary,
   * recovery list, trust metrics and the Prometheus exposition, with API keys for two tenants.
   */
  const ACME = 'acme-runtime-key-0001';
  const ACME_AUDITOR = 'acme-auditor-key-0001';
  const GLOBEX = 'globex-runtime-key-01';
  const ACME_ADMIN = 'acme-admin-key-000001';
  const GLOBEX_ADMIN = 'globex-admin-key-0001';
  const REF = 'run_81/step_4';
  const ENCODED = encodeURIComponent(REF);

  let ledger: LedgerProcess;
  let last = 0;

  function get(path: string, key = ACME) {
    return request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${key}` });
  }

  async function submit(ref: string, type: string, data: Record<string, unknown>, key = ACME): Promise<number> {
    const answer = await submitFact(ledger.baseUrl, ref, type, data, { authorization: `Bearer ${key}` });
    return committedPosition(answer, `${type} on ${ref}`) as number;
  }

  const plan = (ref: string, tool = 'create_invoice', key = ACME, policy?: Record<string, unknown>) =>
    submit(
      ref,
      'StepPlanned',
      { run_id: 'run_81', tool, side_effect: 'write', input_hash: 'h1', ...(policy ? { policy } : {}) },
      key,
    );

  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${ACME}:runtime:acme,${ACME_AUDITOR}:auditor:acme,${GLOBEX}:runtime:globex,${ACME_ADMIN}:admin:acme,${GLOBEX_ADMIN}:admin:globex`,
      },
    });
    await plan(REF, 'create_invoice', ACME, { verification_tool: 'get_invoice_by_operation_ref' });
    await submit(REF, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' });
    await submit(REF, 'EnvelopeRecorded', { attempt: 1, envelope: envelopes.unknown(REF) });
    await sleep(100);
    await submit(REF, 'VerificationRecorded', {
      outcome: 'found_committed',
      checked_at: new Date().toISOString(),
      evidence_ref: 'inv_123',
    });
    // A dispatch on the succeeded step: answered with the original success, a duplicate prevented.
    await submit(REF, 'AttemptDispatched', { attempt: 2, input_hash: 'h1' });
    // Three more steps of the run, left in flight or verifying, 400 ms apart.
    for (const [index, stuck] of ['dispatched', 'verifying', 'dispatched'].entries()) {
      const ref = `run_81/step_${5 + index}`;
      await plan(ref, index === 2 ? 'send_email' : 'create_invoice');
      last = await submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' });
      if (stuck === 'verifying')
        last = await submit(ref, 'EnvelopeRecorded', { attempt: 1, envelope: envelopes.unknown(ref) });
      await sleep(400);
    }
    last = await plan('globex/only', 'create_invoice', GLOBEX);
  });

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  describe('GET /v1/operations/{ref}/evidence', () => {
    it('answers the trail and its verdict, read-your-writes, with the ref percent-decoded from one path segment', async () => {
      const answer = await get(`/v1/operations/${ENCODED}/evidence?wait_for_position=${last}`);

      expect(ENCODED).toBe('run_81%2Fstep_4');
      expect(answer.status).toBe(200);
      expect(answer.body.operation_ref).toBe('run_81/step_4');
      expect(answer.body.verdict).toMatchObject({
        status: 'succeeded',
        commit_state: 'committed',
        proven_by: 'verification',
        evidence_ref: 'inv_123',
      });
      expect(answer.body.verdict.statement).toBe(
        'committed — verified via get_invoice_by_operation_ref, evidence inv_123; 1 duplicate write prevented',
      );
      expect(answer.body.entries.map((entry: { kind: string }) => entry.kind)).toEqual([
        'plan',
        'transition',
        'attempt',
        'transition',
        'envelope',
        'transition',
        'verification',
        'transition',
        'refusal',
      ]);
      for (const entry of answer.body.entries) {
        expect(entry).toMatchObject({
          revision: expect.any(Number),
          event_id: expect.any(String),
          recorded_at: expect.any(String),
          actor: expect.stringMatching(/^key_/),
        });
      }
      expect(answer.body.as_of_position).toBeGreaterThanOrEqual(last);
    });

    it('pages the trail with an opaque cursor, and refuses a cursor it did not issue', async () => {
      const first = await get(`/v1/operations/${ENCODED}/evidence?limit=4`);
      const second = await get(`/v1/operations/${ENCODED}/evidence?limit=4&cursor=${first.body.next_cursor}`);
      const third = await get(`/v1/operations/${ENCODED}/evidence?limit=4&cursor=${second.body.next_cursor}`);

      expect([first, second, third].map((page) => page.body.entries.length)).toEqual([4, 4, 1]);
      expect(third.body.next_cursor).toBeUndefined();
      const revisions = [first, second, third].flatMap((page) =>
        page.body.entries.map((entry: { revision: number }) => entry.revision),
      );
      expect(revisions).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
      const bad = await get(`/v1/operations/${ENCODED}/evidence?cursor=bm90LWEtY3Vyc29y`);
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'BAD_REQUEST', field: 'cursor' });
    });

    it("answers 404 for another tenant's operation exactly as for one that does not exist", async () => {
      const theirs = await get(`/v1/operations/${ENCODED}/evidence`, GLOBEX);
      const nobodys = await get(`/v1/operations/${encodeURIComponent('run_81/nope')}/evidence`);

      for (const answer of [theirs, nobodys]) {
        expect(answer.status).toBe(404);
        expect(answer.contentType).toContain('application/problem+json');
        expect(answer.body.code).toBe('OPERATION_NOT_FOUND');
      }
      expect(theirs.body.detail).toBe(nobodys.body.detail);
    });

    it('answers 503 PROJECTION_LAGGING with Retry-After when the position is not projected in time', async () => {
      const answer = await get(
        `/v1/operations/${ENCODED}/evidence?wait_for_position=${last + 1_000}&wait_timeout_ms=100`,
      );

      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('1');
      expect(answer.contentType).toContain('application/problem+json');
      expect(answer.body.code).toBe('PROJECTION_LAGGING');
    });

    it('needs a key', async () => {
      const answer = await request(ledger.baseUrl, 'GET', `/v1/operations/${ENCODED}/evidence`);
      expect(answer.status).toBe(401);
    });
  });

  describe('GET /v1/runs/{run_id}', () => {
    it("lists the run's steps in planned order with where each stands, for the caller's tenant only", async () => {
      const run = await get(`/v1/runs/run_81?wait_for_position=${last}`, ACME_AUDITOR);

      expect(run.status).toBe(200);
      expect(run.body).toMatchObject({
        run_id: 'run_81',
        total: 4,
        open: 3,
        counts: { succeeded: 1, dispatched: 2, verifying: 1 },
      });
      expect(
        run.body.steps.map((step: { operation_ref: string; status: string }) => [step.operation_ref, step.status]),
      ).toEqual([
        ['run_81/step_4', 'succeeded'],
        ['run_81/step_5', 'dispatched'],
        ['run_81/step_6', 'verifying'],
        ['run_81/step_7', 'dispatched'],
      ]);
      expect((await get('/v1/runs/run_81', GLOBEX)).body.total).toBe(1);
    });

    it('filters by status and tool, pages, and answers 404 / 400 with the stable codes', async () => {
      const dispatched = await get('/v1/runs/run_81?status=dispatched');
      expect(dispatched.body.steps.map((step: { operation_ref: string }) => step.operation_ref)).toEqual([
        'run_81/step_5',
        'run_81/step_7',
      ]);
      const email = await get('/v1/runs/run_81?tool=send_email');
      expect(email.body.steps.map((step: { operation_ref: string }) => step.operation_ref)).toEqual(['run_81/step_7']);
      const page = await get('/v1/runs/run_81?limit=3');
      const rest = await get(`/v1/runs/run_81?limit=3&cursor=${page.body.next_cursor}`);
      expect([...page.body.steps, ...rest.body.steps]).toHaveLength(4);

      const missing = await get('/v1/runs/run_99');
      expect(missing.status).toBe(404);
      expect(missing.body.code).toBe('RUN_NOT_FOUND');
      const bad = await get('/v1/runs/run_81?status=lost');
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'BAD_REQUEST', field: 'status' });
    });
  });

  describe('GET /v1/recovery', () => {
    it('lists operations in flight or verifying, oldest first', async () => {
      const answer = await get(`/v1/recovery?wait_for_position=${last}`);

      expect(answer.status).toBe(200);
      expect(
        answer.body.items.map((item: { operation_ref: string; status: string }) => [item.operation_ref, item.status]),
      ).toEqual([
        ['run_81/step_5', 'dispatched'],
        ['run_81/step_6', 'verifying'],
        ['run_81/step_7', 'dispatched'],
      ]);
      expect(answer.body.items[0]).toMatchObject({
        operation_ref: 'run_81/step_5',
        tool: 'create_invoice',
        run_id: 'run_81',
        attempt: 1,
      });
      expect(Object.keys(answer.body.items[0])).toEqual(
        expect.arrayContaining(['operation_ref', 'tool', 'run_id', 'status', 'since', 'attempt']),
      );
      expect((await get('/v1/recovery', GLOBEX)).body.items).toEqual([]);
    });

    it('filters by age (the ledger clock), tool and status, and pages with a cursor', async () => {
      const all = (await get('/v1/recovery')).body.items as Array<{ operation_ref: string; since: string }>;
      // Between the ages of step_6 and step_7, which are 400 ms apart.
      const threshold = Date.now() - Date.parse(all[1].since) - 200;
      const old = await get(`/v1/recovery?older_than_ms=${threshold}`);
      expect(old.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([
        'run_81/step_5',
        'run_81/step_6',
      ]);
      expect(
        (await get('/v1/recovery?tool=send_email')).body.items.map(
          (item: { operation_ref: string }) => item.operation_ref,
        ),
      ).toEqual(['run_81/step_7']);
      expect(
        (await get('/v1/recovery?status=verifying')).body.items.map(
          (item: { operation_ref: string }) => item.operation_ref,
        ),
      ).toEqual(['run_81/step_6']);

      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await get(`/v1/recovery?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(...page.body.items.map((item: { operation_ref: string }) => item.operation_ref));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen).toEqual(['run_81/step_5', 'run_81/step_6', 'run_81/step_7']);

      const bad = await get('/v1/recovery?older_than_ms=soon');
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'BAD_REQUEST', field: 'older_than_ms' });
      expect((await get('/v1/recovery?status=succeeded')).body).toMatchObject({ code: 'BAD_REQUEST', field: 'status' });
    });
  });

  describe('GET /v1/metrics/trust', () => {
    it('answers overall and per tool', async () => {
      const answer = await get(`/v1/metrics/trust?wait_for_position=${last}`);

      expect(answer.status).toBe(200);
      expect(answer.body.overall).toMatchObject({
        tools: 2,
        operations_planned: 4,
        unknown_outcomes: 2,
        verified_found_committed: 1,
        resolved_by_verification: 1,
        duplicate_writes_prevented: 1,
        pending_recovery_now: 1,
        pending_recovery: { count: 1 },
      });
      expect(answer.body.overall.pending_recovery.min_ms).toBeGreaterThanOrEqual(100);
      expect(
        answer.body.tools.map((tool: { tool: string; operations_planned: number }) => [
          tool.tool,
          tool.operations_planned,
        ]),
      ).toEqual([
        ['create_invoice', 3],
        ['send_email', 1],
      ]);
      const one = await get('/v1/metrics/trust?tool=send_email');
      expect(one.body.tools).toHaveLength(1);
      expect(one.body.overall.operations_planned).toBe(4);
      expect((await get('/v1/metrics/trust', GLOBEX)).body.overall.operations_planned).toBe(1);
    });
  });

  describe('GET /metrics', () => {
    it("shows a tenant's admin only that tenant's series, trust metrics included; a runtime key none", async () => {
      await get(`/v1/metrics/trust?wait_for_position=${last}`);
      const answer = await get('/metrics', ACME_ADMIN);

      expect(answer.status).toBe(200);
      expect(answer.contentType).toContain('text/plain');
      const text = answer.body as string;
      // Process-wide series (CPU, projection lag) show every tenant's load: a metrics key's, not a tenant's.
      expect(text).not.toContain('process_cpu_user_seconds_total');
      expect(text).not.toMatch(/ledger_projection_lag_events/);
      expect(text).toContain('ledger_trust_unknown_outcomes_total{tenant="acme",tool="create_invoice"} 2');
      expect(text).toContain('ledger_trust_duplicate_writes_prevented_total{tenant="acme",tool="create_invoice"} 1');
      expect(text).toContain(
        'ledger_trust_verifications_total{tenant="acme",tool="create_invoice",outcome="found_committed"} 1',
      );
      expect(text).not.toContain('tenant="globex"');
      expect((await get('/metrics', GLOBEX_ADMIN)).body).toContain(
        'ledger_trust_operations_planned_total{tenant="globex",tool="create_invoice"} 1',
      );
      expect((await get('/metrics', ACME)).status).toBe(403);
      expect((await request(ledger.baseUrl, 'GET', '/metrics')).status).toBe(401);
    });
  });

  describe('across a restart', () => {
    it('keeps the read model in the data directory and serves the same answers after a kill', async () => {
      const before = await get(`/v1/metrics/trust?wait_for_position=${last}`);
      await ledger.kill();
      expect(existsSync(join(ledger.dataDir, 'read-models.sqlite'))).toBe(true);
      ledger = await ledger.restart();

      const after = await get(`/v1/metrics/trust?wait_for_position=${last}`);
      expect(after.body.overall).toEqual(before.body.overall);
      expect((await get(`/v1/operations/${ENCODED}/evidence`)).body.entries).toHaveLength(9);
    });
  });

  // Last: it adds an operation to run_81, which the counts above must not see.
  describe('large answers', () => {
    it('sends a large trail (UTF-8 bytes beyond Latin-1) whole, its Content-Length counting bytes, not characters', async () => {
      const ref = 'run_81/long_trail';
      await plan(ref);
      await submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' });
      for (let attempt = 2; attempt < 40; attempt++) {
        // Each refused dispatch is recorded: the trail grows by one entry per request.
        const refused = await request(
          ledger.baseUrl,
          'POST',
          `/v1/operations/${encodeURIComponent(ref)}/events`,
          { events: [{ event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt, input_hash: 'h1' } }] },
          { authorization: `Bearer ${ACME}` },
        );
        expect(refused.body.code).toBe('ATTEMPT_IN_FLIGHT');
      }
      // A refusal answers no log position to wait for: read until the trail holds all 38 (bounded).
      let response = await fetch(`${ledger.baseUrl}/v1/operations/${encodeURIComponent(ref)}/evidence?limit=1000`, {
        headers: { authorization: `Bearer ${ACME}` },
      });
      for (
        let tries = 0;
        tries < 100 && ((await response.clone().json()) as { entries: unknown[] }).entries.length < 42;
        tries++
      ) {
        await sleep(20);
        response = await fetch(`${ledger.baseUrl}/v1/operations/${encodeURIComponent(ref)}/evidence?limit=1000`, {
          headers: { authorization: `Bearer ${ACME}` },
        });
      }
      const bytes = Buffer.from(await response.arrayBuffer());
      const text = bytes.toString('utf8');

      expect(response.status).toBe(200);
      expect(bytes.length).toBeGreaterThan(8 * 1024);
      expect(Number(response.headers.get('content-length'))).toBe(bytes.length);
      expect(text.length).toBeLessThan(bytes.length);
      const body = JSON.parse(text);
      expect(body.verdict.statement).toBe('pending — attempt 1 in flight, no outcome recorded yet');
      expect(body.entries.filter((entry: { kind: string }) => entry.kind === 'refusal')).toHaveLength(38);
    });
  });
});

describe('the projection engine in its worker thread', () => {
  /**
   * The built service with the projection engine in its worker thread (the default on the embedded
   * store), over real HTTP: every read asked to wait for a position sees it, lag and health say
   * where the engine runs, the inline mode answers the same from the same files, and a worker
   * thread that ends (ended here through the application's own engine, as a crash inside it would)
   * is started again from the stored checkpoints without counting anything twice.
   */
  const KEY = 'worker-thread-runtime-key-01';
  const DIST = resolve(__dirname, '../../dist/src');

  function client(baseUrl: string) {
    const headers = { authorization: `Bearer ${KEY}` };
    return {
      async step(run: string, n: number): Promise<number> {
        const ref = `${run}/step_${n}`;
        const answer = await request(
          baseUrl,
          'POST',
          `/v1/operations/${encodeURIComponent(ref)}/events`,
          {
            events: [
              fact('StepPlanned', {
                run_id: run,
                tool: n % 2 === 0 ? 'create_invoice' : 'send_email',
                side_effect: 'write',
                input_hash: 'h1',
              }),
              fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' }),
            ],
          },
          headers,
        );
        if (answer.status !== 200) throw new Error(`${ref}: ${answer.status} ${JSON.stringify(answer.body)}`);
        return answer.body.position as number;
      },
      get: (path: string) => request(baseUrl, 'GET', path, undefined, headers),
    };
  }

  describe('the built service, projections in a worker thread', () => {
    let ledger: LedgerProcess;

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    it('answers every read asked to wait for a position with that position applied, then the same inline', async () => {
      ledger = await startLedger({ env: { LEDGER_API_KEYS: `${KEY}:runtime:acme` } });
      const api = client(ledger.baseUrl);
      const ready = await until(
        () => request(ledger.baseUrl, 'GET', '/health/ready'),
        (answer) => answer.status === 200,
        'ready',
      );
      expect(ready.body.details.projections).toMatchObject({ status: 'up', thread: 'worker', worker_restarts: 0 });

      // Concurrent submits, each read back at once with its own position: the run summary counts it.
      const runs = ['run_a', 'run_b', 'run_c', 'run_d'];
      await Promise.all(
        runs.map(async (run) => {
          for (let n = 0; n < 10; n++) {
            const position = await api.step(run, n);
            const summary = await api.get(`/v1/runs/${run}?wait_for_position=${position}&wait_timeout_ms=10000`);
            expect(summary.status).toBe(200);
            expect(summary.body.total).toBe(n + 1);
          }
        }),
      );
      const trust = await api.get(
        `/v1/metrics/trust?wait_for_position=${await api.step('run_e', 0)}&wait_timeout_ms=10000`,
      );
      expect(trust.body.overall.operations_planned).toBe(41);
      const caughtUp = await until(
        () => request(ledger.baseUrl, 'GET', '/health/ready'),
        (answer) => answer.body.details.projections.events_behind === 0,
        'no lag',
      );
      expect(caughtUp.body.details.projections).toMatchObject({
        status: 'up',
        state: 'live',
        thread: 'worker',
        lag_ms: 0,
      });

      // Same files, inline this time: the checkpoints the worker committed are where it goes on from.
      await ledger.stop();
      ledger = await startLedger({
        dataDir: ledger.dataDir,
        env: { LEDGER_API_KEYS: `${KEY}:runtime:acme`, LEDGER_PROJECTIONS_THREAD: 'inline' },
      });
      const inline = client(ledger.baseUrl);
      const after = await inline.get(
        `/v1/metrics/trust?wait_for_position=${await inline.step('run_e', 1)}&wait_timeout_ms=10000`,
      );
      expect(after.body.overall.operations_planned).toBe(42);
      const health = await request(ledger.baseUrl, 'GET', '/health/ready');
      expect(health.body.details.projections.thread).toBe('inline');
    });

    it('refuses to start with a mode it does not know', async () => {
      // It exits on its own: the refusal is awaited, not raced against a guess of how long a start takes.
      await expect(startLedger({ env: { LEDGER_PROJECTIONS_THREAD: 'process' } })).rejects.toThrow(
        /LEDGER_PROJECTIONS_THREAD must be worker or inline/,
      );
    });
  });

  /**
   * The application built by its own createApp in a child process, listening on a free loopback
   * port; on a message it ends the projection engine's worker thread through the application's own
   * engine (no hook in the service for this).
   */
  const CHILD = `
const { join } = require('node:path');
const DIST = process.env.TEST_DIST;
const { createApp } = require(join(DIST, 'app.js'));
const { loadConfig } = require(join(DIST, 'config/ledger-config.js'));
const { PROJECTION_ENGINE } = require(join(DIST, 'projection-engine/projections.module.js'));
(async () => {
  const config = loadConfig({ ...process.env, PORT: '0' });
  const app = await createApp({ config });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const engine = app.get(PROJECTION_ENGINE);
  process.on('message', async (message) => {
    if (message === 'end-worker') {
      await engine.worker.terminate();
      process.send('ended');
    }
    if (message === 'close') {
      await app.close();
      process.send('closed');
    }
  });
  process.send({ port: app.getHttpServer().address().port });
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

  describe('a worker thread that ends', () => {
    let dir: string;
    let child: ChildProcess;
    let output = '';

    afterAll(() => {
      if (child?.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });

    const ask = (message: string, reply: string) =>
      new Promise<void>((resolve) => {
        const listen = (answer: unknown) => {
          if (answer === reply) {
            child.off('message', listen);
            resolve();
          }
        };
        child.on('message', listen);
        child.send(message);
      });

    it('is started again from the stored checkpoints, loudly, and counts nothing twice', async () => {
      dir = mkdtempSync(join(tmpdir(), 'ledger-worker-end-'));
      const script = join(dir, 'child.js');
      writeFileSync(script, CHILD);
      child = fork(script, [], {
        env: {
          ...process.env,
          TEST_DIST: DIST,
          LEDGER_DATA_DIR: join(dir, 'data'),
          LEDGER_API_KEYS: `${KEY}:runtime:acme`,
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      child.stdout?.on('data', (chunk) => (output += chunk));
      child.stderr?.on('data', (chunk) => (output += chunk));
      const port = await new Promise<number>((resolve, reject) => {
        child.once('message', (message: { port: number }) => resolve(message.port));
        child.once('exit', (code) => reject(new Error(`child exited ${code}: ${output}`)));
      });
      const baseUrl = `http://127.0.0.1:${port}`;
      const api = client(baseUrl);
      let last = 0;
      for (let n = 0; n < 8; n++) last = await api.step('run_k', n);
      expect(
        (await api.get(`/v1/metrics/trust?wait_for_position=${last}&wait_timeout_ms=10000`)).body.overall
          .operations_planned,
      ).toBe(8);

      await ask('end-worker', 'ended');
      const down = await request(baseUrl, 'GET', '/health/ready');
      expect(down.body.details.projections).toMatchObject({
        status: 'down',
        state: 'failed',
        thread: 'worker',
        worker_restarts: 1,
      });
      // Appends go on while it is down; the new thread catches up from the checkpoints.
      for (let n = 8; n < 16; n++) last = await api.step('run_k', n);
      const trust = await api.get(`/v1/metrics/trust?wait_for_position=${last}&wait_timeout_ms=10000`);
      expect(trust.status).toBe(200);
      expect(trust.body.overall.operations_planned).toBe(16);
      expect((await api.get(`/v1/runs/run_k?wait_for_position=${last}`)).body).toMatchObject({
        total: 16,
        counts: { dispatched: 16 },
      });
      // Ready allows a lag within LEDGER_READY_MAX_LAG_MS while the new thread is still catching up
      // (docs/operations.md, "GET /health/ready"): waited on until it reports itself live.
      const up = await until(
        () => request(baseUrl, 'GET', '/health/ready'),
        (answer) => answer.status === 200 && answer.body.details.projections.state === 'live',
        'ready and live again',
      );
      expect(up.body.details.projections).toMatchObject({ state: 'live', worker_restarts: 1 });
      expect(output).toMatch(/the projection worker thread ended; starting it again from the stored checkpoints/);

      await ask('close', 'closed');
      child.kill('SIGTERM');
    });
  });
});
