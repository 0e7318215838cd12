/**
 * A decision's cost against its step's history (docs/architecture.md, "Reading a stream"): the same
 * decision (a dispatch on a step that succeeded, answered as a prevented duplicate and recorded),
 * taken on a step's 10th event and on its last ones up to the 10,000th (a stream holds at most
 * 10,000 by default), by LedgerService over the SQLite store in this process. Each short step
 * is taken once at its 10th event; the long step is grown first to 10,000 events less the decisions
 * measured, and each of its decisions is interleaved with a short one, so the machine's drift falls
 * on both alike. What each decision read from the store is counted (`eventsRead`) beside its time.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SubmittedEvent } from '@recovery-ledger/core';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { DEFAULT_MAX_STREAM_EVENTS } from '../../src/ledger/submit-command.handler';
import { ledgerOver, runOperation } from '../ledger-workload';
import { percentile } from '../support/report';

export interface DecisionCostAt {
  /** The events the decisions appended: their revisions in the step's stream (from 0: the 10th is 9). */
  revisions: [number, number];
  medianMs: number;
  p90Ms: number;
  /** The most events any one of these decisions read from the store. */
  maxEventsRead: number;
}

export interface DecisionCost {
  decisions: number;
  early: DecisionCostAt;
  late: DecisionCostAt;
  /** late.medianMs / early.medianMs */
  ratio: number;
}

/** The most events a stream may hold by default: its last decision is its 10,000th event. */
const STREAM_BOUND = DEFAULT_MAX_STREAM_EVENTS;

/** Operation n of the workload with n % 20 < 8 takes the committed path: planned, dispatched, succeeded. */
const SUCCEEDING = (k: number) => k * 20;
const duplicateDispatch = (): SubmittedEvent => ({
  event_id: randomUUID(),
  type: 'AttemptDispatched',
  data: { attempt: 2, input_hash: 'h1' } as SubmittedEvent['data'],
});

export async function decisionCostFigure(dir: string, decisions = 200): Promise<DecisionCost> {
  const store = SqliteEventStore.open({ file: join(dir, 'decision-cost.sqlite') });
  const ledger = ledgerOver(store);
  const context = (n: number) => ({
    tenant: 'acme',
    actor: 'key_bench',
    operationRef: `run_${Math.floor(n / 8)}/step_${n}`,
  });
  /** Appends decisions to step n (in submits of at most 100) until its head is at `revision`. */
  const growTo = async (n: number, revision: number): Promise<void> => {
    const one = async () => (await ledger.submit(context(n), { events: [duplicateDispatch()] })).revision;
    const first = await one();
    let at = await one();
    const perDecision = at - first;
    for (
      let count = Math.floor((revision - at) / perDecision);
      count > 0;
      count = Math.floor((revision - at) / perDecision)
    )
      at = (
        await ledger.submit(context(n), { events: Array.from({ length: Math.min(100, count) }, duplicateDispatch) })
      ).revision;
  };
  const timed = async (n: number): Promise<{ ms: number; read: number; revision: number }> => {
    const before = store.eventsRead;
    const from = performance.now();
    const answer = await ledger.submit(context(n), { events: [duplicateDispatch()] });
    const ms = performance.now() - from;
    return { ms, read: store.eventsRead - before, revision: answer.revision };
  };
  try {
    const long = SUCCEEDING(0);
    await runOperation(ledger, long, 'acme');
    // Revisions count from 0: the decisions measured append the stream's last events, up to its 10,000th.
    await growTo(long, STREAM_BOUND - 1 - decisions);
    const shorts = Array.from({ length: decisions }, (_, k) => SUCCEEDING(k + 1));
    for (const n of shorts) {
      await runOperation(ledger, n, 'acme');
      await growTo(n, 8);
    }
    // Warm-up (JIT, page cache) on steps not measured.
    for (let k = 0; k < 20; k++) {
      const n = SUCCEEDING(decisions + 1 + k);
      await runOperation(ledger, n, 'acme');
      await timed(n);
    }
    const early: Array<{ ms: number; read: number; revision: number }> = [];
    const late: Array<{ ms: number; read: number; revision: number }> = [];
    for (const n of shorts) {
      early.push(await timed(n));
      late.push(await timed(long));
    }
    const at = (runs: typeof early): DecisionCostAt => ({
      revisions: [runs[0].revision, runs[runs.length - 1].revision],
      medianMs: percentile(
        runs.map((run) => run.ms),
        0.5,
      ),
      p90Ms: percentile(
        runs.map((run) => run.ms),
        0.9,
      ),
      maxEventsRead: Math.max(...runs.map((run) => run.read)),
    });
    const result = { decisions, early: at(early), late: at(late) };
    return { ...result, ratio: result.late.medianMs / result.early.medianMs };
  } finally {
    await store.close();
  }
}
