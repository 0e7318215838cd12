/**
 * The built service with the projection engine in its worker thread (the default on the embedded
 * store), over real HTTP: every read asked to wait for a position sees it, lag and health say
 * where the engine runs, the inline mode answers the same from the same files, and a worker
 * thread that ends (ended here through the application's own engine, as a crash inside it would)
 * is started again from the stored checkpoints without counting anything twice.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fact, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

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
    await expect(startLedger({ env: { LEDGER_PROJECTIONS_THREAD: 'process' }, timeoutMs: 5_000 })).rejects.toThrow(
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
    const up = await until(
      () => request(baseUrl, 'GET', '/health/ready'),
      (answer) => answer.status === 200,
      'ready again',
    );
    expect(up.body.details.projections).toMatchObject({ state: 'live', worker_restarts: 1 });
    expect(output).toMatch(/the projection worker thread ended; starting it again from the stored checkpoints/);

    await ask('close', 'closed');
    child.kill('SIGTERM');
  });
});
