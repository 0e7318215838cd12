/**
 * The checker must be able to fail. A real log is written through the ledger's command path on the
 * SQLite store, with the records a client would keep of the answers; the checker passes it, and
 * then flags each kind of damage done to a copy of the file: a lost acknowledged fact, an event id
 * stored twice, a rewritten event, a gap in revisions, an answer that disagrees with the log, a
 * refusal that was not recorded, and a provider that wrote twice.
 *
 * The same log is written to PostgreSQL too (a database of this file's own, test/support/postgres.ts),
 * where the checker reads `ledger_events` and the shared read models on connections of its own
 * (postgres-log.ts): it passes the log, counts the trust metrics as the SQLite count does, and
 * flags a lost fact and a drifted shared read model.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, LedgerProblem, type SubmittedEvent } from '@recovery-ledger/core';
import { LedgerService } from '../../src/ledger/ledger.service';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import {
  checkLog,
  checkRebuild,
  checkTrustReadModel,
  emptyReport,
  figures,
  readRawLog,
  rebuildProjections,
  sqliteLog,
  type CheckName,
  type CheckReport,
} from './checker';
import type { LoadRecord } from './records';
import type { EventStore } from '../../src/store/event-store.port';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { describeWithPostgres } from '../support/postgres';
import { Client } from 'pg';
import { checkSharedRebuild, postgresLog } from './postgres-log';
import { countTrust, sqliteTrustSql } from './trust-count';

const settings = { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 };
const REFS = ['run_chk/step_1', 'run_chk/step_2', 'run_chk/step_3'];

const submitted = (type: SubmittedEvent['type'], data: Record<string, unknown>): SubmittedEvent => ({
  event_id: randomUUID(),
  type,
  data: data as SubmittedEvent['data'],
});

const success = (ref: string) => ({
  ok: true,
  operation_ref: ref,
  commit_state: 'committed',
  result: { id: 'inv_1' },
  verification: { checked_at: '2026-12-02T10:00:00.000Z', evidence_ref: 'inv_1' },
});

/**
 * Writes the checker's log through the ledger's command path on `store`, and answers the records a
 * client would keep of the answers.
 */
async function writeLog(store: EventStore): Promise<LoadRecord[]> {
  const records: LoadRecord[] = [];
  const ledger = new LedgerService(store, { now: () => new Date() }, settings);
  const submit = async (ref: string, event: SubmittedEvent) => {
    try {
      const answer = await ledger.submit({ tenant: 'default', actor: 'local', operationRef: ref }, { events: [event] });
      records.push({
        kind: 'ack',
        client: 0,
        ref,
        event_id: event.event_id,
        type: event.type,
        status: answer.results[0].status,
        revision: answer.revision,
        position: answer.position,
        state_status: answer.state.status,
        replayed: answer.replayed === true,
        sends: 1,
      });
    } catch (error) {
      if (!(error instanceof LedgerProblem)) throw error;
      const revision = (error.extras.state as { revision?: number } | undefined)?.revision;
      records.push({
        kind: 'refusal',
        client: 0,
        ref,
        event_id: event.event_id,
        type: event.type,
        code: error.code,
        ...(revision === undefined ? {} : { revision }),
        sends: 1,
      });
    }
  };
  for (const ref of REFS) {
    await submit(
      ref,
      submitted('StepPlanned', { run_id: 'run_chk', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
    );
    await submit(ref, submitted('AttemptDispatched', { attempt: 1, input_hash: 'h1' }));
    records.push({ kind: 'tool_write', client: 0, ref, attempt: 1 });
    await submit(ref, submitted('AttemptDispatched', { attempt: 2, input_hash: 'h1' }));
    await submit(ref, submitted('EnvelopeRecorded', { attempt: 1, envelope: success(ref) }));
    await submit(ref, submitted('AttemptDispatched', { attempt: 2, input_hash: 'h1' }));
  }
  return records;
}

/** The checks that found something. */
const failing = (report: CheckReport) =>
  (Object.entries(report) as Array<[CheckName, { failures: string[] }]>)
    .filter(([, outcome]) => outcome.failures.length > 0)
    .map(([name]) => name);

describe('the campaign checker', () => {
  let dir: string;
  let file: string;
  const records: LoadRecord[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-checker-'));
    file = join(dir, 'events.sqlite');
    const store = SqliteEventStore.open({ file });
    records.push(...(await writeLog(store)));
    await store.close();
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Checks a copy of the log after `damage` was done to it with plain SQL. */
  function checkDamaged(damage: (db: Database.Database) => void, extra: LoadRecord[] = []): CheckReport {
    const copy = join(dir, `damaged-${randomUUID()}.sqlite`);
    copyFileSync(file, copy);
    const db = new Database(copy);
    damage(db);
    db.close();
    const report = emptyReport();
    checkLog(readRawLog(copy), [...records, ...extra], report);
    return report;
  }

  test('passes the log as written, having checked every record', () => {
    const report = checkDamaged(() => undefined);
    expect(failing(report)).toEqual([]);
    expect(report.acknowledged_in_log.checked).toBe(records.filter((record) => record.kind === 'ack').length);
    expect(report.refusals_recorded.checked).toBe(records.filter((record) => record.kind === 'refusal').length);
    expect(records.some((record) => record.kind === 'ack' && record.replayed)).toBe(true);
    const log = readRawLog(file);
    expect(figures(log, records, report)).toMatchObject({ lost: 0, duplicated: 0, mismatches: 0 });
  });

  test('flags an acknowledged fact missing from the log as lost', () => {
    const report = checkDamaged((db) => {
      // The last event of a stream, so nothing else about the stream breaks.
      db.prepare('DELETE FROM events WHERE position = (SELECT MAX(position) FROM events)').run();
    });
    expect(failing(report)).toContain('acknowledged_in_log');
    const log = readRawLog(file);
    expect(figures(log, records, report).lost).toBe(1);
  });

  test('flags an event id stored twice', () => {
    const report = checkDamaged((db) => {
      const row = db
        .prepare("SELECT * FROM events WHERE stream = 'op-default:run_chk/step_1' AND revision = 0")
        .get() as Record<string, unknown>;
      db.prepare('INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, 0, ?, ?, ?, ?)').run(
        'op-default:run_chk/step_9',
        row.event_id,
        row.type,
        row.data,
        row.metadata,
      );
    });
    expect(failing(report)).toContain('unique_event_ids');
  });

  test('flags a rewritten event by its hash chain', () => {
    const report = checkDamaged((db) => {
      db.prepare(
        "UPDATE events SET data = json_set(data, '$.input_hash', 'h2') WHERE stream = 'op-default:run_chk/step_2' AND type = 'StepPlanned'",
      ).run();
    });
    expect(failing(report)).toContain('hash_chain');
  });

  test("flags a gap in a stream's revisions", () => {
    const report = checkDamaged((db) => {
      db.prepare("DELETE FROM events WHERE stream = 'op-default:run_chk/step_3' AND revision = 2").run();
    });
    expect(failing(report)).toEqual(expect.arrayContaining(['contiguous_revisions', 'hash_chain']));
  });

  test('flags an answer whose revision or state is not what the log says', () => {
    const ack = records.find((record) => record.kind === 'ack' && record.type === 'EnvelopeRecorded');
    if (!ack || ack.kind !== 'ack') throw new Error('no envelope ack');
    const report = checkDamaged(() => undefined, [{ ...ack, revision: ack.revision - 1, state_status: 'verifying' }]);
    expect(failing(report)).toEqual(['ack_answer_matches_log']);
  });

  test('flags a refused dispatch whose refusal is not recorded', () => {
    const report = checkDamaged((db) => {
      db.prepare(
        "DELETE FROM events WHERE position = (SELECT MAX(position) FROM events WHERE stream = 'op-default:run_chk/step_1' AND type = 'DispatchRefused' AND json_extract(data, '$.code') = 'ATTEMPT_IN_FLIGHT')",
      ).run();
    });
    expect(failing(report)).toContain('refusals_recorded');
  });

  test('flags a provider that wrote twice for one operation, or wrote an attempt never granted', () => {
    const report = checkDamaged(
      () => undefined,
      [
        { kind: 'tool_write', client: 0, ref: REFS[0], attempt: 2 },
        { kind: 'tool_write', client: 0, ref: REFS[1], attempt: 7 },
      ],
    );
    expect(failing(report)).toEqual(['tool_writes']);
    expect(report.tool_writes.failures).toHaveLength(4);
  });

  test('holds the trust projection to the SQL count, and a live read model to a rebuild, and flags a drift in either', async () => {
    const rebuilt = await rebuildProjections(file);
    const live = join(dir, 'live-read-models.sqlite');
    try {
      copyFileSync(rebuilt.file, live);
      const clean = emptyReport();
      await checkTrustReadModel(rebuilt.file, sqliteLog(file), clean);
      checkRebuild(rebuilt.file, live, clean);
      expect(failing(clean)).toEqual([]);
      expect(clean.trust_read_model_equals_count.checked).toBe(2);
      expect(clean.rebuild_equals_live.checked).toBeGreaterThan(REFS.length);

      // One duplicate prevented too many in the live model: both comparisons must see it.
      const db = new Database(live);
      db.prepare(
        "UPDATE rm_trust_metrics SET doc = json_set(doc, '$.duplicate_writes_prevented', json_extract(doc, '$.duplicate_writes_prevented') + 1)",
      ).run();
      db.close();
      const drifted = emptyReport();
      await checkTrustReadModel(live, sqliteLog(file), drifted);
      checkRebuild(rebuilt.file, live, drifted);
      expect(failing(drifted)).toEqual(['trust_read_model_equals_count', 'rebuild_equals_live']);
      expect(drifted.trust_read_model_equals_count.failures.join('\n')).toContain(
        'duplicate_writes_prevented: served 4, counted 3',
      );
    } finally {
      rebuilt.dispose();
    }
  });
});

describeWithPostgres('the campaign checker on PostgreSQL', (database) => {
  const records: LoadRecord[] = [];
  let client: Client;

  beforeAll(async () => {
    const store = new PostgresEventStore({ connectionString: database().url });
    records.push(...(await writeLog(store)));
    await store.close();
  });

  // A connection per test: ended before the file's database is dropped (describeWithPostgres's afterAll).
  beforeEach(async () => {
    client = new Client({ connectionString: database().url });
    await client.connect();
  });

  afterEach(async () => {
    await client?.end();
  });

  test('passes the log as written, and counts the trust metrics with SQL as the SQLite count does', async () => {
    const log = postgresLog(database().url);
    const report = emptyReport();
    const raw = await log.read();
    checkLog(raw, records, report);
    expect(failing(report)).toEqual([]);
    expect(report.acknowledged_in_log.checked).toBe(records.filter((record) => record.kind === 'ack').length);
    expect(figures(raw, records, report)).toMatchObject({ lost: 0, duplicated: 0, mismatches: 0 });

    // The same rows in an SQLite events table: the two dialects of the count must agree.
    const dir = mkdtempSync(join(tmpdir(), 'ledger-checker-pg-'));
    const copy = new Database(join(dir, 'events.sqlite'));
    try {
      copy.exec(
        'CREATE TABLE events (position INTEGER PRIMARY KEY, stream TEXT, revision INTEGER, event_id TEXT, type TEXT, data TEXT, metadata TEXT)',
      );
      const { rows } = await client.query(
        'SELECT position, stream, revision, event_id, type, data, metadata FROM ledger_events',
      );
      const insert = copy.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)');
      for (const row of rows)
        insert.run(Number(row.position), row.stream, row.revision, row.event_id, row.type, row.data, row.metadata);
      const counted = await log.countTrust('default');
      expect(counted).toEqual(await countTrust(sqliteTrustSql(copy), 'default'));
      expect(counted.overall).toMatchObject({ operations_planned: REFS.length, duplicate_writes_prevented: 3 });
    } finally {
      copy.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('holds the shared read models to a rebuild from zero, and flags a drifted document or a missing link', async () => {
    const log = postgresLog(database().url);
    const rebuilt = await log.rebuild();
    try {
      // Published as a projector publishes (docs/postgres.md, "Read models"): the rebuild's rows, as stored.
      const fromZero = new Database(rebuilt.file, { readonly: true });
      try {
        for (const { name } of LEDGER_PROJECTIONS) {
          for (const row of fromZero.prepare(`SELECT key, doc FROM rm_${name}`).all() as Array<{
            key: string;
            doc: string;
          }>)
            await client.query(
              'INSERT INTO ledger_read_model_docs (projection, key, doc, change) VALUES ($1, $2, $3, 1)',
              [name, row.key, row.doc],
            );
          for (const row of fromZero.prepare(`SELECT stream, link FROM rm_${name}_links`).all() as Array<{
            stream: string;
            link: string;
          }>)
            await client.query(
              'INSERT INTO ledger_read_model_links (projection, stream, link, change) VALUES ($1, $2, $3, 1)',
              [name, row.stream, row.link],
            );
        }
        for (const row of fromZero
          .prepare('SELECT projection, version, position, recorded_at FROM projection_checkpoints')
          .all() as Array<{ projection: string; version: number; position: number; recorded_at: string | null }>)
          await client.query(
            'INSERT INTO ledger_read_model_checkpoints (projection, version, position, recorded_at, change) VALUES ($1, $2, $3, $4, 1)',
            [row.projection, row.version, row.position, row.recorded_at],
          );
      } finally {
        fromZero.close();
      }
      const clean = emptyReport();
      await checkSharedRebuild(rebuilt.file, database().url, clean);
      await checkTrustReadModel(rebuilt.file, log, clean);
      expect(failing(clean)).toEqual([]);
      expect(clean.rebuild_equals_live.checked).toBeGreaterThan(REFS.length);

      await client.query(
        "UPDATE ledger_read_model_docs SET doc = jsonb_set(doc::jsonb, '{duplicate_writes_prevented}', '4')::text WHERE projection = 'trust_metrics'",
      );
      await client.query("DELETE FROM ledger_read_model_links WHERE stream = 'op-default:run_chk/step_2'");
      const drifted = emptyReport();
      await checkSharedRebuild(rebuilt.file, database().url, drifted);
      expect(failing(drifted)).toEqual(['rebuild_equals_live']);
      expect(drifted.rebuild_equals_live.failures.join('\n')).toContain('trust_metrics document');
      expect(drifted.rebuild_equals_live.failures.join('\n')).toContain(
        'op-default:run_chk/step_2: in the rebuild only',
      );
    } finally {
      rebuilt.dispose();
    }
  });

  test('flags an acknowledged fact deleted from ledger_events as lost', async () => {
    await client.query('DELETE FROM ledger_events WHERE position = (SELECT max(position) FROM ledger_events)');
    const raw = await postgresLog(database().url).read();
    const report = emptyReport();
    checkLog(raw, records, report);
    expect(failing(report)).toContain('acknowledged_in_log');
    expect(figures(raw, records, report).lost).toBe(1);
  });
});
