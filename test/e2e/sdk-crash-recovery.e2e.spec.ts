/**
 * The contract's fault-injection test: real worker processes (the built example worker) are killed
 * right after dispatching a write, and at random points, many times; every restart runs recover()
 * first. Afterwards the provider shows exactly one invoice per succeeded operation, the ledger
 * shows every step succeeded or escalated, its evidence names the provider's own invoice, and no
 * stream has two writes granted for one key without proof in between that the first did not commit.
 *
 * The random schedule is seeded (SDK_CRASH_SEED to replay one); the seed is in every failure message.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { LedgerClient, type StoredEventView } from '@recovery-ledger/client';
import {
  startInvoiceProvider,
  type Fault,
  type InvoiceProvider,
} from '../../examples/invoice-provider/invoice-provider';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const WORKER = resolve(__dirname, '../../dist/examples/invoice-worker.js');
const RUN = 'run_crash';
const COUNT = 24;
const RANDOM_ROUNDS = 12;
const WINDOW_MS = 400;

/** mulberry32: small, seedable, good enough to spread kill points. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface WorkerRun {
  killed: boolean;
  code: number | null;
  lines: Array<Record<string, any>>;
  stderr: string;
}

function runWorker(
  ledgerUrl: string,
  providerUrl: string,
  count: number,
  kill?: { afterMs?: number; when?: () => boolean },
): Promise<WorkerRun> {
  const args = [
    WORKER,
    ...['--ledger', ledgerUrl, '--provider', providerUrl, '--run', RUN, '--count', String(count)],
    ...['--window-ms', String(WINDOW_MS), '--max-attempts', '5', '--tool-timeout-ms', '600'],
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let killed = false;
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const killNow = () => {
    if (child.exitCode === null && !killed) {
      killed = true;
      child.kill('SIGKILL');
    }
  };
  const timer = kill?.afterMs !== undefined ? setTimeout(killNow, kill.afterMs) : undefined;
  const poll = kill?.when ? setInterval(() => kill.when!() && killNow(), 2) : undefined;
  return new Promise((resolveRun) => {
    child.once('exit', (code) => {
      if (timer) clearTimeout(timer);
      if (poll) clearInterval(poll);
      const lines = stdout
        .split('\n')
        .filter((line) => line.trim().startsWith('{'))
        .map((line) => {
          try {
            return JSON.parse(line) as Record<string, any>;
          } catch {
            return { unparsed: line };
          }
        });
      resolveRun({ killed, code, lines, stderr });
    });
  });
}

/** Two writes granted for one key need proof in between that the first did not commit. */
function unprovenRedispatches(events: StoredEventView[]): number[] {
  const offending: number[] = [];
  let proofSinceLastDispatch = true;
  for (const event of events) {
    if (event.type === 'AttemptDispatched') {
      if (!proofSinceLastDispatch) offending.push(event.data.attempt as number);
      proofSinceLastDispatch = false;
    } else if (event.type === 'EnvelopeRecorded') {
      const envelope = event.data.envelope as { ok: boolean; commit_state: string };
      if (!envelope.ok && envelope.commit_state === 'not_committed') proofSinceLastDispatch = true;
    } else if (event.type === 'VerificationRecorded' && event.data.outcome === 'not_found') {
      proofSinceLastDispatch = true;
    }
  }
  return offending;
}

describe('crash after dispatch, recover() on restart (real processes)', () => {
  let ledgerProcess: LedgerProcess;
  let provider: InvoiceProvider;
  let ledger: LedgerClient;
  const seed = Number(process.env.SDK_CRASH_SEED ?? Date.now() % 2 ** 31);
  const next = random(seed);
  const refs = Array.from({ length: COUNT }, (_, index) => `${RUN}/invoice_${index + 1}`);

  beforeAll(async () => {
    if (!existsSync(WORKER)) throw new Error(`${WORKER} is missing: run npm run build first`);
    ledgerProcess = await startLedger();
    provider = await startInvoiceProvider();
    ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl });
  });

  afterAll(async () => {
    await provider?.close();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
  });

  it(`leaves exactly one invoice per operation and every step succeeded or escalated (seed ${seed})`, async () => {
    const runs: WorkerRun[] = [];

    // 1. Deterministic: killed while the provider is working on the write the ledger granted.
    provider.inject({ operation_ref: refs[0], fault: { kind: 'slow', delay_ms: 1500 } });
    runs.push(
      await runWorker(ledgerProcess.baseUrl, provider.url, 1, {
        when: () => (provider.createRequests().get(refs[0]) ?? 0) >= 1,
      }),
    );
    expect(runs[0].killed).toBe(true);

    /** Create requests the provider has received so far, over all keys. */
    const writesSent = () => [...provider.createRequests().values()].reduce((sum, n) => sum + n, 0);

    // 2. Random: faults on random keys; each life is killed just after its k-th write went out
    //    (k and a few ms of slack drawn at random), and the queue grows so every life has work.
    const faults: Fault[] = [
      { kind: 'slow', delay_ms: 300 },
      { kind: 'slow', delay_ms: 900 },
      { kind: 'accept-then-destroy' },
      { kind: 'accept-then-timeout' },
      { kind: 'bad-gateway', commit: true },
      { kind: 'bad-gateway' },
      { kind: 'rate-limit', retry_after_s: 1 },
    ];
    for (let round = 0; round < RANDOM_ROUNDS; round++) {
      const count = Math.min(COUNT, 4 + 2 * round);
      for (let n = 0; n < 3; n++) {
        provider.inject({
          operation_ref: refs[Math.floor(next() * count)],
          fault: faults[Math.floor(next() * faults.length)],
        });
      }
      const killAt = writesSent() + 1 + Math.floor(next() * 3);
      const slackMs = Math.floor(next() * 40);
      let fireAt: number | undefined;
      runs.push(
        await runWorker(ledgerProcess.baseUrl, provider.url, count, {
          when: () => {
            if (fireAt === undefined && writesSent() >= killAt) fireAt = Date.now() + slackMs;
            return fireAt !== undefined && Date.now() >= fireAt;
          },
          // A life that sends fewer writes than drawn is still killed, later.
          afterMs: 5000,
        }),
      );
    }

    // 3. A last life, left to finish.
    const last = await runWorker(ledgerProcess.baseUrl, provider.url, COUNT);
    runs.push(last);
    const context = `seed ${seed}; last worker: ${last.stderr}\n${last.lines.map((line) => JSON.stringify(line)).join('\n')}`;
    expect({ code: last.code, context }).toEqual({ code: 0, context });
    const done = last.lines.find((line) => line.event === 'done');
    expect(done).toBeDefined();

    // Requests a killed worker left in flight (a slow provider) finish before the provider is read.
    await new Promise((resolveWait) => setTimeout(resolveWait, 1600));

    // Most lives must have died mid-run, or the test proved little.
    expect(
      runs.filter((run) => run.killed && !run.lines.some((line) => line.event === 'done')).length,
    ).toBeGreaterThanOrEqual(RANDOM_ROUNDS / 2);
    const recoveredRefs = runs.flatMap((run) =>
      run.lines.filter((line) => line.event === 'recovered').flatMap((line) => line.entries),
    );
    expect(recoveredRefs.length).toBeGreaterThan(0);
    // recover() never invents a key: everything it touched is one of the run's own operations.
    expect(recoveredRefs.every((entry: { operationRef: string }) => refs.includes(entry.operationRef))).toBe(true);

    const invoices = provider.invoices();
    expect(invoices.every((invoice) => refs.includes(invoice.operation_ref))).toBe(true);
    for (const ref of refs) {
      const state = await ledger.getOperation(ref);
      const events = (await ledger.getEvents(ref)).events;
      const mine = invoices.filter((invoice) => invoice.operation_ref === ref);
      const where = `${ref} (${context.split('\n')[0]})`;
      expect({ where, status: ['succeeded', 'escalated'].includes(state.status) }).toEqual({ where, status: true });
      expect({ where, unproven: unprovenRedispatches(events) }).toEqual({ where, unproven: [] });
      expect({ where, invoices: mine.length <= 1 }).toEqual({ where, invoices: true });
      if (state.status === 'succeeded') {
        expect({ where, invoices: mine.length }).toEqual({ where, invoices: 1 });
        // The ledger's proof names the provider's own invoice for this key.
        const success = state.success as { evidence_ref?: string } | undefined;
        expect({ where, evidence: success?.evidence_ref }).toEqual({ where, evidence: mine[0].id });
      }
    }
  }, 240_000);
});
