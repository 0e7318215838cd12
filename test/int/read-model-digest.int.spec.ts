/**
 * A read model is compared with the log by each projection's checkpoint, not rebuilt to be checked
 * (docs/reliability.md, "A corrupted read model"): the event at the projection's position must be
 * the one it applied, and its rows, hashed again, the digest committed with them. A read model left
 * by a crash (no seal) is then trusted as it stands and catches up from its checkpoints; an edited
 * row, a deleted row, a read model from another log or a projection's new version is rebuilt.
 * Counted by what was read and folded, never by time.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS, type AnyProjection } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { checkReadModelDigests } from '../../src/projection-engine/read-model-verification';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { envelopes, LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';
import { counting } from '../support/killed-engine';

const KEY = 'read-model-digest-test-key-0123456789';

async function workload(scenario: LedgerScenario, operations: number, prefix: string): Promise<void> {
  for (let n = 0; n < operations; n++) {
    const ref = `run_${n % 3}/${prefix}_${n}`;
    await scenario.plan(ref, { run_id: `run_${n % 3}`, tool: n % 2 === 0 ? 'create_invoice' : 'send_email' });
    await scenario.dispatch(ref, 1);
    scenario.clock.advance(1_000);
    await scenario.envelope(ref, 1, n % 2 === 0 ? envelopes.committed(ref) : envelopes.unknown(ref));
    scenario.clock.advance(31_000);
  }
}

describe('the read model compared with the log by digest', () => {
  let dir: string;
  let store: SqliteEventStore;
  let scenario: LedgerScenario;
  const file = () => join(dir, 'read-models.sqlite');

  /** Builds the read model to the head, then leaves it as a crash would: closed, with no seal. */
  async function builtThenCrashed(): Promise<number> {
    const readModel = SqliteReadModel.open({ file: file(), digestKey: KEY });
    const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, batchSize: 50 });
    engine.start();
    const head = await store.headPosition();
    expect(await engine.waitForPosition(head, 10_000)).toBe(true);
    await engine.stop();
    readModel.close();
    return head;
  }

  function reopened(projections: readonly AnyProjection[] = LEDGER_PROJECTIONS, key = KEY): SqliteReadModel {
    const readModel = SqliteReadModel.open({ file: file(), digestKey: key, readCacheBytes: 0 });
    for (const projection of projections) readModel.register(projection);
    return readModel;
  }

  function edit(sql: string): void {
    const db = new Database(file());
    db.exec(sql);
    db.close();
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-digest-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), pollIntervalMs: 20 });
    scenario = new LedgerScenario(store);
    await workload(scenario, 40, 'op');
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('trusts a read model left by a crash after one event per projection, and catches up only what followed', async () => {
    const head = await builtThenCrashed();
    await workload(scenario, 3, 'later');
    const newHead = await store.headPosition();

    const readModel = reopened();
    const { store: spied, read } = counting(store);
    const report = await checkReadModelDigests(spied, readModel, LEDGER_PROJECTIONS);
    expect(report.projections.filter((projection) => projection.mismatch)).toEqual([]);
    expect(report.projections.every((projection) => projection.position === head)).toBe(true);
    expect(report.eventsRead).toBe(read());
    expect(read()).toBeLessThanOrEqual(LEDGER_PROJECTIONS.length);
    expect(report.rowsRead).toBeGreaterThan(0);

    // Following on from the checkpoints: only the events after the head are read and folded.
    const before = read();
    const engine = new ProjectionEngine({ store: spied, readModel, projections: LEDGER_PROJECTIONS, batchSize: 50 });
    engine.start();
    expect(await engine.waitForPosition(newHead, 10_000)).toBe(true);
    await engine.stop();
    const afterHead = (await store.readAll({ after: head, limit: 10_000 })).length;
    expect(read() - before).toBe(afterHead);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
    // The digest kept live still holds after the catch-up.
    const again = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
    expect(again.projections.filter((projection) => projection.mismatch)).toEqual([]);
    readModel.close();
  });

  it('finds an edited document, an edited index column, a deleted row and an added one, each in its projection', async () => {
    await builtThenCrashed();
    const cases: Array<[string, string]> = [
      ['evidence_trail', "UPDATE rm_evidence_trail SET doc = json_set(doc, '$.status', 'edited') WHERE rowid = 1"],
      ['step_state', "UPDATE rm_step_state SET status = 'edited' WHERE rowid = 2"],
      ['run_summary', 'DELETE FROM rm_run_summary WHERE rowid = 1'],
      [
        'trust_metrics',
        "INSERT INTO rm_trust_metrics (key, doc, row_hash) SELECT key || 'x', doc, row_hash FROM rm_trust_metrics LIMIT 1",
      ],
    ];
    for (const [projection, sql] of cases) {
      const copy = join(dir, `copy-${projection}.sqlite`);
      const db = new Database(file());
      await db.backup(copy);
      db.close();
      const victim = new Database(copy);
      victim.exec(sql);
      victim.close();
      const readModel = SqliteReadModel.open({ file: copy, digestKey: KEY, readCacheBytes: 0 });
      for (const each of LEDGER_PROJECTIONS) readModel.register(each);
      const report = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
      readModel.close();
      expect(report.projections.filter((entry) => entry.mismatch)).toEqual([
        expect.objectContaining({ name: projection, mismatch: 'digest' }),
      ]);
    }
  });

  it('rebuilds a projection found to differ beside its live tables, which stand until the swap', async () => {
    await builtThenCrashed();
    edit("UPDATE rm_evidence_trail SET doc = json_set(doc, '$.status', 'edited') WHERE rowid = 1");
    const readModel = reopened();
    const report = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
    const damaged = report.projections.filter((projection) => projection.mismatch).map((projection) => projection.name);
    expect(damaged).toEqual(['evidence_trail']);
    // Readers use their own connection, as the service's request thread does beside the projection thread.
    const reader = SqliteReadModel.open({ file: file(), digestKey: KEY, readCacheBytes: 0 });
    for (const projection of LEDGER_PROJECTIONS) reader.register(projection);
    const before = snapshot(reader, LEDGER_PROJECTIONS);
    const engine = new ProjectionEngine({
      store,
      readModel,
      projections: LEDGER_PROJECTIONS,
      batchSize: 50,
      rebuildBatchSize: 10,
      rebuildCommitEvents: 30,
    });
    const seen: Array<ReturnType<typeof snapshot>> = [];
    let rebuilding = true;
    const look = () => {
      if (!rebuilding) return;
      seen.push(snapshot(reader, LEDGER_PROJECTIONS));
      setImmediate(look);
    };
    setImmediate(look);
    await engine.rebuild(damaged);
    rebuilding = false;
    // Many looks while it ran (it commits every 30 events): each saw the live tables whole, as they stood.
    expect(seen.length).toBeGreaterThan(5);
    for (const view of seen) expect(view).toEqual(before);
    const expected = expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log());
    expect(snapshot(reader, LEDGER_PROJECTIONS)).toEqual(expected);
    expect(readModel.checkpoints().map((checkpoint) => checkpoint.projection)).toEqual(
      LEDGER_PROJECTIONS.map((projection) => projection.name).sort(),
    );
    const again = await checkReadModelDigests(store, reader, LEDGER_PROJECTIONS);
    expect(again.projections.filter((projection) => projection.mismatch)).toEqual([]);
    reader.close();
    readModel.close();
  });

  it('does not believe a digest made without the key', async () => {
    await builtThenCrashed();
    const readModel = reopened(LEDGER_PROJECTIONS, 'another-key-entirely-0123456789');
    const report = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
    readModel.close();
    expect(report.projections.every((projection) => projection.mismatch === 'digest')).toBe(true);
  });

  it('finds a read model whose position the log holds another event at, or none', async () => {
    await builtThenCrashed();
    edit("UPDATE projection_checkpoints SET event_hash = 'sha256:not-this-one' WHERE projection = 'run_summary'");
    edit("UPDATE projection_checkpoints SET position = position + 1000 WHERE projection = 'step_state'");
    const readModel = reopened();
    const report = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
    readModel.close();
    expect(
      report.projections
        .filter((projection) => projection.mismatch)
        .map((projection) => [projection.name, projection.mismatch])
        .sort(),
    ).toEqual([
      ['run_summary', 'event'],
      ['step_state', 'event'],
    ]);
  });

  it('treats rows written before digests were kept as unknown', async () => {
    await builtThenCrashed();
    edit("UPDATE projection_checkpoints SET digest = NULL WHERE projection = 'trust_metrics'");
    const readModel = reopened();
    const report = await checkReadModelDigests(store, readModel, LEDGER_PROJECTIONS);
    readModel.close();
    expect(report.projections.filter((projection) => projection.mismatch)).toEqual([
      expect.objectContaining({ name: 'trust_metrics', mismatch: 'unknown' }),
    ]);
  });

  it('rebuilds a projection whose version changed beside its rows, from zero, and keeps the others', async () => {
    const head = await builtThenCrashed();
    const bumped = LEDGER_PROJECTIONS.map((projection) =>
      projection.name === 'run_summary' ? { ...projection, version: projection.version + 1 } : projection,
    );
    const readModel = SqliteReadModel.open({ file: file(), digestKey: KEY, readCacheBytes: 0 });
    const { store: spied, read } = counting(store);
    const engine = new ProjectionEngine({ store: spied, readModel, projections: bumped, batchSize: 50 });
    // Served as they stand meanwhile: the old version's rows, at the position they reached.
    expect(engine.status().projections.map((projection) => [projection.name, projection.checkpoint])).toEqual(
      bumped.map((projection) => [projection.name, head]),
    );
    const report = await checkReadModelDigests(spied, readModel, bumped);
    expect(report.projections.filter((projection) => projection.mismatch)).toEqual([]);
    engine.start();
    await engine.rebuild(['run_summary']);
    await engine.stop();
    // The whole log read again for the new version, and nothing more.
    expect(read() - report.eventsRead).toBe((await store.readAll({ after: 0, limit: 10_000 })).length);
    expect(snapshot(readModel, bumped)).toEqual(expectedSnapshot(bumped, await scenario.log()));
    readModel.close();
  });
});
