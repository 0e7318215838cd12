/**
 * Figure 3: batch submit, 100 facts per request, in stored events per second, beside raw
 * better-sqlite3 batched inserts of the very same rows with the same durability (WAL,
 * synchronous=FULL, one transaction per batch, the service's table and indexes).
 *
 * The rows the raw baseline inserts are the ones the ledger stores for such a request (computed
 * first by the real LedgerService on an in-memory store), so both sides write the same bytes.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { ledgerOver } from '../ledger-workload';
import { startLedger } from '../support/processes';
import type { FigureRow } from '../support/report';
import { measured, type Measured } from './http-submit.figure';
import { batchFacts, operationRef } from '../support/submit-bodies';

export interface BatchSettings {
  dir: string;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  /** Extra node arguments for the service processes (e.g. --cpu-prof). */
  nodeArgs?: string[];
  size: number;
}

export interface StoredRow {
  type: string;
  event_id: string;
  data: string;
  metadata: string;
}

/** What the ledger stores for one batch request (the fact's rows and what they cause). */
export async function rowsOfOneBatch(size: number): Promise<StoredRow[]> {
  const store = SqliteEventStore.open({ file: ':memory:' });
  const ledger = ledgerOver(store);
  const ref = operationRef('template', 0);
  await ledger.submit(
    { tenant: 'default', actor: 'local', operationRef: ref },
    { events: batchFacts('template', 0, size) as never },
  );
  const events = await store.readAll({ after: 0, limit: 10_000 });
  await store.close();
  return events.map((event) => ({
    type: event.type,
    event_id: event.event_id,
    data: JSON.stringify(event.data),
    metadata: JSON.stringify(event.metadata),
  }));
}

/** The raw baseline: one BEGIN IMMEDIATE … COMMIT per batch, prepared insert, nothing else. */
async function rawBatchedInserts(
  file: string,
  rows: readonly StoredRow[],
  seconds: number,
): Promise<{ eventsPerSecond: number; batches: number; ms: number }> {
  // The service's own schema (table, unique indexes), created by the store itself.
  await SqliteEventStore.open({ file, groupCommit: false }).close();
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  const insert = db.prepare(
    'INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const batch = db.transaction((stream: string) => {
    rows.forEach((row, revision) => insert.run(stream, revision, row.event_id, row.type, row.data, row.metadata));
  });
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let batches = 0;
  while (performance.now() < deadline && batches < 100_000) {
    batch.immediate(`op-default:raw/op_${batches}`);
    batches += 1;
  }
  const ms = performance.now() - started;
  db.close();
  return { eventsPerSecond: (batches * rows.length) / (ms / 1000), batches, ms };
}

export async function batchSubmitFigure(
  settings: BatchSettings,
  rows: readonly StoredRow[],
  log: (line: string) => void,
): Promise<FigureRow> {
  log(
    `  figure 3: raw better-sqlite3 batched inserts (${rows.length} rows per transaction), then the ledger (${settings.size} facts per request)`,
  );
  const raw = await rawBatchedInserts(join(settings.dir, 'raw-inserts.sqlite'), rows, Math.min(settings.seconds, 5));
  const dataDir = join(settings.dir, 'batch');
  const label = 'fig3';
  const ledger = await startLedger(dataDir, {}, settings.nodeArgs);
  let run: Measured;
  try {
    run = await measured(
      ledger,
      {
        url: ledger.baseUrl,
        connections: settings.connections,
        seconds: settings.seconds,
        warmupSeconds: settings.warmupSeconds,
        scenario: { kind: 'batch', label, size: settings.size },
      },
      true,
    );
  } finally {
    await ledger.stop();
  }
  const result = run.result;
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  const stored = (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  db.close();
  if (stored < result.ok * rows.length)
    throw new Error(`figure 3: ${result.ok} batches acknowledged, only ${stored} rows stored`);
  const eventsPerSecond = (result.ok * rows.length) / result.seconds;
  return {
    id: '3',
    name: `batch submit, ${settings.size} facts/request (${rows.length} stored events), ${settings.connections} connections`,
    figure: { label: 'ledger', value: eventsPerSecond, unit: 'events/s' },
    baseline: { label: 'raw better-sqlite3, WAL + FULL', value: raw.eventsPerSecond, unit: 'events/s' },
    ratio: eventsPerSecond / raw.eventsPerSecond,
    target: { text: '≥ 30 %', met: eventsPerSecond / raw.eventsPerSecond >= 0.3 },
    details: {
      facts_per_second: (result.ok * settings.size) / result.seconds,
      server_cpu_ms_per_request: Number(run.cpuMsPerRequest.toFixed(3)),
      appends_per_group_commit: run.appendsPerCommit,
      requests_per_second: result.rps,
      p50_ms: result.latencyMs.p50,
      p99_ms: result.latencyMs.p99,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      status_codes: result.statusCodes,
      stored_rows: stored,
      raw_batches: raw.batches,
    },
  };
}
