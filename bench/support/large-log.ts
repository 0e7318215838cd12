/**
 * A large, valid log for figures 5–7, written in seconds rather than minutes.
 *
 * First a template: `templateEvents` events written through the real command path (LedgerService
 * over the SQLite store, group commit, synchronous=FULL, many operations in flight, the workload's
 * twenty paths with their refusals), so the rows are exactly what production writes. Then copies of
 * the template, in its position order (so its interleaving of operations is kept), with every run
 * and operation renamed (`run_7` becomes `run_c3x7`) and every stream's hash chain recomputed: the
 * copy verifies like the original (src/integrity/hash-chain.ts). Copying skips only the decision work
 * that figures 1–4 measure; what the projections read is the same.
 */
import Database from 'better-sqlite3';
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { canonicalJson, LedgerProblem } from '@recovery-ledger/core';
import { GENESIS_HASH } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { ledgerOver, runOperation } from '../ledger-workload';
import { stepIndexer } from '../../src/ledger/step-index';

const PREV = 'PREVHASHPLACEHOLDER';
const HASH = 'HASHPLACEHOLDER';
const RUN = /run_(\d+)/g;

interface TemplateRow {
  stream: string;
  event_id: string;
  type: string;
  data: string;
  /** Stored metadata with prev_hash and hash as placeholders. */
  metadata: string;
  /** The canonical hash body (hash-chain.ts) with prev_hash as a placeholder. */
  body: string;
}

async function writeTemplate(file: string, templateEvents: number): Promise<number> {
  const store = SqliteEventStore.open({ file });
  const ledger = ledgerOver(store);
  let next = 0;
  const worker = async () => {
    while ((await store.headPosition()) < templateEvents) {
      const n = next++;
      await runOperation(ledger, n, n % 10 === 0 ? 'globex' : 'acme');
    }
  };
  await Promise.all(Array.from({ length: 500 }, worker));
  await store.close();
  return next;
}

function readTemplate(db: Database.Database): TemplateRow[] {
  const rows = db
    .prepare('SELECT stream, revision, event_id, type, data, metadata FROM events ORDER BY position')
    .all() as Array<{
    stream: string;
    revision: number;
    event_id: string;
    type: string;
    data: string;
    metadata: string;
  }>;
  return rows.map((row) => {
    const data = JSON.parse(row.data) as unknown;
    const { hash: _hash, prev_hash: _prev, ...rest } = JSON.parse(row.metadata) as Record<string, unknown>;
    const chained = { ...rest, prev_hash: PREV };
    return {
      stream: row.stream,
      event_id: row.event_id,
      type: row.type,
      data: row.data,
      metadata: JSON.stringify({ ...chained, hash: HASH }),
      body: canonicalJson({
        stream: row.stream,
        revision: row.revision,
        event_id: row.event_id,
        type: row.type,
        data,
        metadata: chained,
      }),
    };
  });
}

export interface LargeLog {
  events: number;
  templateEvents: number;
  templateOperations: number;
  copies: number;
  seconds: number;
}

/** Fills `file` up to `target` events (nothing is done when it already holds that many). */
export async function writeLargeLog(file: string, target: number, templateEvents = 20_000): Promise<LargeLog> {
  const started = performance.now();
  const templateOperations = await writeTemplate(file, Math.min(target, templateEvents));
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  const template = readTemplate(db);
  const insert = db.prepare(
    'INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const count = () => (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  let events = count();
  let copies = 0;
  while (events < target) {
    copies += 1;
    const rename = (text: string) => text.replace(RUN, `run_c${copies}x$1`);
    const heads = new Map<string, { revision: number; hash: string }>();
    const rows = template.slice(0, target - events);
    for (let from = 0; from < rows.length; from += 20_000) {
      db.transaction(() => {
        for (const row of rows.slice(from, from + 20_000)) {
          const stream = rename(row.stream);
          const head = heads.get(stream) ?? { revision: -1, hash: GENESIS_HASH };
          const revision = head.revision + 1;
          const body = rename(row.body).replace(PREV, head.hash);
          const hash = createHash('sha256').update(`${head.hash}\n${body}`).digest('hex');
          insert.run(
            stream,
            revision,
            row.event_id,
            row.type,
            rename(row.data),
            rename(row.metadata).replace(PREV, head.hash).replace(HASH, hash),
          );
          heads.set(stream, { revision, hash });
        }
      }).immediate();
    }
    events += rows.length;
  }
  events = count();
  // Rows copied behind the store carry no anchors: drop them, so the next open anchors the log as
  // it stands, in one pass, as it does for a log written before anchors existed.
  db.exec('DROP TABLE IF EXISTS stream_heads; DROP TABLE IF EXISTS log_anchor; PRAGMA user_version = 0;');
  db.close();
  return {
    events,
    templateEvents: template.length,
    templateOperations,
    copies,
    seconds: (performance.now() - started) / 1000,
  };
}

/**
 * Figure 6's operation: planned, dispatched, then dispatched again and again while the attempt is
 * in flight. Each of those is refused (ATTEMPT_IN_FLIGHT) and the refusal recorded, which is how a
 * runtime stuck in a retry loop grows a long evidence trail. Answers the stream's event count.
 */
export async function writeLongOperation(file: string, ref: string, events: number): Promise<number> {
  const store = SqliteEventStore.open({ file, indexer: stepIndexer });
  const ledger = ledgerOver(store);
  const context = { tenant: 'default', actor: 'local', operationRef: ref };
  const submit = (type: 'StepPlanned' | 'AttemptDispatched', data: Record<string, unknown>) =>
    ledger
      .submit(context, { events: [{ event_id: randomUUID(), type, data: data as never }] })
      .catch((error: unknown) => {
        if (!(error instanceof LedgerProblem)) throw error;
      });
  await submit('StepPlanned', { run_id: 'run_long', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' });
  let stored = 0;
  for (let round = 0; stored < events; round++) {
    await submit('AttemptDispatched', { attempt: 1, input_hash: 'h1' });
    if (round % 50 === 0 || stored > events - 60)
      stored = (await store.readStream(operationStream('default', ref))).length;
  }
  await store.close();
  return stored;
}
