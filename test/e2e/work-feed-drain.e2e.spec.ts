/**
 * The drain: many planned steps, four worker processes on one feed, and a provider process that
 * times out after committing on 5 % of creates and rate-limits 5 %, with its idempotency off so a
 * second create for one operation would be a second invoice. Every step must end succeeded or
 * escalated, the provider's own count must show each operation created at most once, and no two
 * workers may ever have acted on one step under leases both current at once.
 *
 * DRAIN_STEPS sets the size (default 1,000 here; `npm run drain` runs 10,000). The figures of a run
 * are printed, never asserted.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { LedgerClient } from '@recovery-ledger/client';
import { VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  CREATE_INVOICE,
  INVOICE,
  startProviderProcess,
  startWorkerProcess,
  waitUntil,
  type ProviderProcess,
  type WorkerProcess,
} from '../support/work-feed-harness';

const STEPS = Number(process.env.DRAIN_STEPS ?? 1000);
const WORKERS = 4;
const CONCURRENCY = Number(process.env.DRAIN_WORKER_CONCURRENCY ?? 12);
const RUN = 'run_drain';

jest.setTimeout(Math.max(240_000, STEPS * 100));

let ledger: LedgerProcess;
let provider: ProviderProcess;
let workers: WorkerProcess[] = [];

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill('SIGKILL')));
  await provider?.stop();
  await ledger?.stop();
  ledger?.cleanup();
});

it(`drains ${STEPS} steps through ${WORKERS} workers against a flaky provider, each operation created at most once`, async () => {
  provider = await startProviderProcess([
    '--no-idempotency',
    '--flaky-timeout',
    '0.05',
    '--flaky-rate-limit',
    '0.05',
    '--retry-after-s',
    '1',
    '--seed',
    '7',
  ]);
  ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
  const client = new LedgerClient({ baseUrl: ledger.baseUrl, timeoutMs: 30_000 });
  const refs = Array.from({ length: STEPS }, (_, index) => `${RUN}/step_${index}`);

  const planStarted = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < refs.length) {
        const operationRef = refs[next++];
        await client.startStep({
          operationRef,
          // Runs of 100 steps, as runtimes have them (one run summary of 10,000 steps is not what is measured).
          runId: `${RUN}_${Math.floor(next / 100)}`,
          tool: CREATE_INVOICE,
          input: { ...INVOICE, amount_cents: 1000 + (next % 5000) },
          policy: { verification_tool: VERIFICATION_TOOL, consistency_window_ms: 2000, max_attempts: 4 },
        });
      }
    }),
  );
  const planMs = Date.now() - planStarted;

  const drainStarted = Date.now();
  workers = Array.from({ length: WORKERS }, (_, index) =>
    startWorkerProcess(ledger.baseUrl, provider.url, [
      ...[
        '--worker-id',
        `drain-${index}`,
        '--concurrency',
        String(CONCURRENCY),
        '--lease-ms',
        '10000',
        '--tool-timeout-ms',
        '1000',
        '--wait-ms',
        '1000',
      ],
    ]),
  );
  const OPEN = [
    'planned',
    'dispatched',
    'retry_scheduled',
    'retry_ready',
    'verifying',
    'needs_input',
    'awaiting_approval',
  ];
  await waitUntil(
    'every step to end',
    async () => {
      for (const status of OPEN) {
        const page = (await (await fetch(`${ledger.baseUrl}/v1/operations?status=${status}&limit=1`)).json()) as {
          items: unknown[];
        };
        if (page.items.length > 0) return undefined;
      }
      return true;
    },
    Math.max(200_000, STEPS * 90),
    1000,
  );
  const drainMs = Date.now() - drainStarted;
  const exits = await Promise.all(workers.map((worker) => worker.kill('SIGTERM')));
  expect(exits).toEqual([0, 0, 0, 0]);
  const reports = workers.map((worker) => worker.lines().find((line) => line.type === 'stopped')?.report);
  workers = [];

  const stats = await provider.stats();
  await ledger.stop();
  const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true });
  const rows = db
    .prepare(
      "SELECT stream, type, data, metadata FROM events WHERE stream LIKE 'op-default:run_drain/%' ORDER BY stream, revision",
    )
    .all() as Array<{
    stream: string;
    type: string;
    data: string;
    metadata: string;
  }>;
  const leaseCount = (db.prepare('SELECT COUNT(*) AS n FROM leases').get() as { n: number }).n;
  db.close();

  // No two workers on one step under current leases at once: facts sent under a lease that still
  // held the step come lease after lease, never one lease's facts between another's.
  const interleaved: string[] = [];
  const leasesSeen = new Map<string, string[]>();
  let factsUnderTakenOverLeases = 0;
  for (const row of rows) {
    const lease = (
      JSON.parse(row.metadata) as { lease?: { lease_id: string; current: boolean; took_over_from?: string } }
    ).lease;
    if (!lease || !lease.current) continue;
    const seen = leasesSeen.get(row.stream) ?? [];
    if (seen[seen.length - 1] !== lease.lease_id) {
      if (seen.includes(lease.lease_id)) interleaved.push(row.stream);
      seen.push(lease.lease_id);
    }
    if (lease.took_over_from) factsUnderTakenOverLeases += 1;
    leasesSeen.set(row.stream, seen);
  }
  expect(interleaved).toEqual([]);

  // Every step ended: its last transition is to succeeded or escalated.
  const finalStatus = new Map<string, string>();
  for (const row of rows) if (row.type === 'TransitionRecorded') finalStatus.set(row.stream, JSON.parse(row.data).to);
  expect(finalStatus.size).toBe(STEPS);
  const counts: Record<string, number> = {};
  for (const status of finalStatus.values()) counts[status] = (counts[status] ?? 0) + 1;
  expect((counts.succeeded ?? 0) + (counts.escalated ?? 0)).toBe(STEPS);

  // The provider's own count, not its idempotency: at most one invoice per operation, one per succeeded step.
  const overCreated = Object.entries(stats.created).filter(([, created]) => created > 1);
  expect(overCreated).toEqual([]);
  const succeeded = [...finalStatus]
    .filter(([, status]) => status === 'succeeded')
    .map(([stream]) => stream.slice('op-default:'.length));
  expect(succeeded.filter((ref) => stats.created[ref] !== 1)).toEqual([]);
  // An escalated step may have an invoice (its lookup could not answer in time, so a person decides:
  // never guessed); it never has two.
  const escalatedWithInvoice = [...finalStatus].filter(
    ([stream, status]) => status === 'escalated' && stats.created[stream.slice('op-default:'.length)] === 1,
  ).length;
  // Every fact of the drain came from a worker under a lease.
  const dispatches = rows.filter((row) => row.type === 'AttemptDispatched');
  expect(dispatches.every((row) => JSON.parse(row.metadata).lease?.current === true)).toBe(true);

  const figures = {
    steps: STEPS,
    workers: WORKERS,
    concurrency_per_worker: CONCURRENCY,
    plan_ms: planMs,
    drain_ms: drainMs,
    steps_per_s: Math.round((STEPS / drainMs) * 1000 * 10) / 10,
    counts,
    escalated_with_invoice: escalatedWithInvoice,
    provider_create_requests: Object.values(stats.create_requests).reduce((sum, n) => sum + n, 0),
    provider_invoices: Object.values(stats.created).reduce((sum, n) => sum + n, 0),
    dispatches: dispatches.length,
    lease_rows: leaseCount,
    facts_under_taken_over_leases: factsUnderTakenOverLeases,
    worker_reports: reports,
  };
  process.stdout.write(`drain figures ${JSON.stringify(figures)}\n`);
});
