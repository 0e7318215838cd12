/**
 * Ways to damage an events file behind the ledger's back, each as an attacker or a bad disk would,
 * straight on the SQLite file with the service stopped (docs/reliability.md, "A log whose every loss
 * is detectable"). Each case says which findings `verify` must report for it.
 */
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { FindingKind } from '../../src/integrity/log-audit';
import { GENESIS_HASH, nextLogHash, sealEvents } from '../../src/integrity/hash-chain';
import type { VerifiedCheckpoint } from '../../src/integrity/verified-checkpoint';
import { openSeeder, seedIncident, tempDataDir } from './cli-harness';

export const TARGET_REF = 'run_81/step_4';
export const TARGET_STREAM = `op-default:${TARGET_REF}`;

interface Row {
  position: number;
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: string;
  metadata: string;
}

export interface TamperCase {
  name: string;
  /** Findings verify must report (each at least once); any other finding may come with them. */
  expect: FindingKind[];
  /** The operation whose history is damaged: appends to it must be refused. */
  ref: string;
  /** Set when the case is only detectable with the anchor key configured. */
  needsAnchorKey?: boolean;
  apply(db: Database.Database): void;
}

function rows(db: Database.Database, stream = TARGET_STREAM): Row[] {
  return db.prepare<[string], Row>('SELECT * FROM events WHERE stream = ? ORDER BY revision').all(stream);
}

/** Re-seals a stream's events from `from` on, so each chain link is valid again (what a careful forger does). */
function reseal(db: Database.Database, stream: string, from: number, edit: (row: Row) => Row = (row) => row): void {
  const all = rows(db, stream);
  let previous =
    from === 0 ? undefined : { revision: from - 1, hash: JSON.parse(all[from - 1].metadata).hash as string };
  for (const row of all.slice(from)) {
    const edited = edit(row);
    const metadata = JSON.parse(edited.metadata);
    const [sealed] = sealEvents(stream, previous, [
      { event_id: edited.event_id, type: edited.type, data: JSON.parse(edited.data), metadata },
    ]);
    db.prepare('UPDATE events SET data = ?, metadata = ? WHERE position = ?').run(
      JSON.stringify(sealed.data),
      JSON.stringify(sealed.metadata),
      row.position,
    );
    previous = { revision: row.revision, hash: sealed.metadata.hash };
  }
}

function setHead(db: Database.Database, stream: string): void {
  const last = rows(db, stream).pop() as Row;
  db.prepare('UPDATE stream_heads SET revision = ?, hash = ?, position = ? WHERE stream = ?').run(
    last.revision,
    JSON.parse(last.metadata).hash,
    last.position,
    stream,
  );
}

/** Recomputes the log anchor over the log as it now stands: what a forger who knows the format does. */
function reanchor(db: Database.Database): void {
  let logHash = GENESIS_HASH;
  let count = 0;
  let position = 0;
  for (const row of db.prepare<[], Row>('SELECT * FROM events ORDER BY position').iterate()) {
    logHash = nextLogHash(logHash, { stream: row.stream, revision: row.revision, hash: JSON.parse(row.metadata).hash });
    count += 1;
    position = row.position;
  }
  db.prepare('UPDATE log_anchor SET position = ?, events = ?, log_hash = ?').run(position, count, logHash);
}

function forgedTail(db: Database.Database, data: Record<string, unknown>, type: string): void {
  const all = rows(db);
  const last = all[all.length - 1];
  const { hash, prev_hash: _prev, submitted_hash: _submitted, ...metadata } = JSON.parse(last.metadata);
  const [sealed] = sealEvents(TARGET_STREAM, { revision: last.revision, hash }, [
    { event_id: 'forged-0001', type, data: data as never, metadata },
  ]);
  db.prepare('INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)').run(
    TARGET_STREAM,
    last.revision + 1,
    sealed.event_id,
    sealed.type,
    JSON.stringify(sealed.data),
    JSON.stringify(sealed.metadata),
  );
}

const SUCCEEDED_FORGERY = {
  from: 'verifying',
  to: 'succeeded',
  reason: 'VERIFIED_COMMITTED',
  caused_by: 'forged',
  directive: { next_action: 'none', attempts_remaining: 0 },
};

export const TAMPER_CASES: TamperCase[] = [
  {
    name: 'an event edited in place',
    expect: ['hash_mismatch'],
    ref: TARGET_REF,
    apply: (db) =>
      db
        .prepare(
          "UPDATE events SET data = json_set(data, '$.input_hash', 'sha256:evil') WHERE stream = ? AND revision = 0",
        )
        .run(TARGET_STREAM),
  },
  {
    name: "an event's metadata (its actor) edited",
    expect: ['hash_mismatch'],
    ref: TARGET_REF,
    apply: (db) =>
      db
        .prepare(
          "UPDATE events SET metadata = json_set(metadata, '$.actor', 'someone-else') WHERE stream = ? AND revision = 2",
        )
        .run(TARGET_STREAM),
  },
  {
    name: 'an event removed from the middle',
    expect: ['revision_gap'],
    ref: TARGET_REF,
    apply: (db) => db.prepare('DELETE FROM events WHERE stream = ? AND revision = 2').run(TARGET_STREAM),
  },
  {
    name: 'two events reordered (revisions swapped)',
    expect: ['prev_hash_mismatch'],
    ref: TARGET_REF,
    apply: (db) => {
      const update = db.prepare('UPDATE events SET revision = ? WHERE stream = ? AND revision = ?');
      update.run(-1, TARGET_STREAM, 1);
      update.run(1, TARGET_STREAM, 2);
      update.run(2, TARGET_STREAM, -1);
    },
  },
  {
    name: "the stream's last event cut off",
    expect: ['head_mismatch'],
    ref: TARGET_REF,
    apply: (db) =>
      db
        .prepare(
          'DELETE FROM events WHERE stream = ? AND revision = (SELECT MAX(revision) FROM events WHERE stream = ?)',
        )
        .run(TARGET_STREAM, TARGET_STREAM),
  },
  {
    name: "the stream's last three events cut off",
    expect: ['head_mismatch'],
    ref: TARGET_REF,
    apply: (db) =>
      db
        .prepare(
          'DELETE FROM events WHERE stream = ? AND revision > (SELECT MAX(revision) - 3 FROM events WHERE stream = ?)',
        )
        .run(TARGET_STREAM, TARGET_STREAM),
  },
  {
    name: 'a whole stream deleted',
    expect: ['stream_deleted'],
    ref: TARGET_REF,
    apply: (db) => db.prepare('DELETE FROM events WHERE stream = ?').run(TARGET_STREAM),
  },
  {
    name: "a stream renamed out of the operations' prefix",
    expect: ['stream_deleted', 'missing_head'],
    ref: TARGET_REF,
    apply: (db) => db.prepare("UPDATE events SET stream = 'hidden-' || stream WHERE stream = ?").run(TARGET_STREAM),
  },
  {
    name: 'a stream renamed to another operation',
    expect: ['stream_deleted', 'hash_mismatch', 'missing_head'],
    ref: TARGET_REF,
    apply: (db) =>
      db.prepare("UPDATE events SET stream = 'op-default:run_81/step_9' WHERE stream = ?").run(TARGET_STREAM),
  },
  {
    name: 'a forged tail event with a valid hash',
    expect: ['head_mismatch'],
    ref: TARGET_REF,
    apply: (db) => forgedTail(db, SUCCEEDED_FORGERY, 'TransitionRecorded'),
  },
  {
    name: 'an edit with the rest of the chain re-hashed',
    expect: ['head_mismatch'],
    ref: TARGET_REF,
    apply: (db) =>
      reseal(db, TARGET_STREAM, 2, (row) =>
        row.revision === 2
          ? { ...row, data: JSON.stringify({ ...JSON.parse(row.data), input_hash: 'sha256:evil' }) }
          : row,
      ),
  },
  {
    name: 'an edit re-hashed, with the stream head rewritten to match',
    expect: ['log_anchor_mismatch'],
    ref: TARGET_REF,
    apply: (db) => {
      reseal(db, TARGET_STREAM, 2, (row) =>
        row.revision === 2
          ? { ...row, data: JSON.stringify({ ...JSON.parse(row.data), input_hash: 'sha256:evil' }) }
          : row,
      );
      setHead(db, TARGET_STREAM);
    },
  },
  {
    name: 'two events of a stream swapped in log position',
    expect: ['position_order'],
    ref: TARGET_REF,
    apply: (db) => {
      const [first, second] = rows(db).slice(1, 3);
      const update = db.prepare('UPDATE events SET position = ? WHERE position = ?');
      update.run(-1, first.position);
      update.run(first.position, second.position);
      update.run(second.position, -1);
    },
  },
  {
    name: 'a forged event of an unexpected shape, sealed, with the head and the anchor rewritten',
    expect: ['unexpected_shape'],
    ref: TARGET_REF,
    apply: (db) => {
      forgedTail(db, { from: 'verifying', to: 'bogus', directive: 'none' }, 'TransitionRecorded');
      setHead(db, TARGET_STREAM);
      reanchor(db);
    },
  },
  {
    name: 'a row whose data is not JSON',
    expect: ['undecodable_row'],
    ref: TARGET_REF,
    apply: (db) =>
      db
        .prepare('UPDATE events SET data = \'{"attempt": 1, broken\' WHERE stream = ? AND revision = 2')
        .run(TARGET_STREAM),
  },
  {
    name: 'a row whose metadata is not JSON',
    expect: ['undecodable_row'],
    ref: TARGET_REF,
    apply: (db) =>
      db.prepare("UPDATE events SET metadata = 'null' WHERE stream = ? AND revision = 1").run(TARGET_STREAM),
  },
  {
    name: 'an event copied into another stream',
    expect: ['prev_hash_mismatch', 'head_mismatch'],
    ref: 'run_81/step_5',
    apply: (db) => {
      const source = rows(db)[4];
      const target = 'op-default:run_81/step_5';
      const last = rows(db, target).pop() as Row;
      db.prepare('INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)').run(
        target,
        last.revision + 1,
        source.event_id,
        source.type,
        source.data,
        source.metadata,
      );
    },
  },
  {
    name: 'the log anchor removed',
    expect: ['log_anchor_missing'],
    ref: TARGET_REF,
    apply: (db) => db.prepare('DELETE FROM log_anchor').run(),
  },
  {
    name: 'the anchor tables dropped',
    expect: ['missing_head', 'log_anchor_missing'],
    ref: TARGET_REF,
    apply: (db) => db.exec('DROP TABLE stream_heads; DROP TABLE log_anchor;'),
  },
  {
    name: 'a stream deleted with its head, the log anchor recomputed (caught by the anchor key)',
    expect: ['anchor_signature_invalid'],
    ref: TARGET_REF,
    needsAnchorKey: true,
    apply: (db) => {
      db.prepare('DELETE FROM events WHERE stream = ?').run(TARGET_STREAM);
      db.prepare('DELETE FROM stream_heads WHERE stream = ?').run(TARGET_STREAM);
      reanchor(db);
    },
  },
];

/** Rewrites every hash of the whole log and its anchors, as an attacker holding no key would: undetectable without a key or a checkpoint. */
export function rewriteEverything(db: Database.Database): void {
  const streams = db.prepare<[], { stream: string }>('SELECT DISTINCT stream FROM events').all();
  for (const { stream } of streams) {
    reseal(db, stream, 0, (row) =>
      row.revision === 0 && stream === TARGET_STREAM
        ? { ...row, data: JSON.stringify({ ...JSON.parse(row.data), input_hash: 'sha256:evil' }) }
        : row,
    );
    setHead(db, stream);
  }
  reanchor(db);
}

/** A data directory holding a real incident's log (the seeder's), its anchors signed with `anchorKey` where given. */
export async function seededLogDir(label: string, anchorKey?: string): Promise<string> {
  const dir = tempDataDir(label);
  const seeder = await openSeeder(dir, { anchorKey });
  await seedIncident(seeder);
  await seeder.close();
  return dir;
}

/** A copy of the data directory `source`, its log then damaged by `apply`. */
export function tamperedCopy(source: string, apply: (db: Database.Database) => void): string {
  const dir = tempDataDir('tampered');
  cpSync(source, dir, { recursive: true });
  const db = new Database(join(dir, 'events.sqlite'));
  try {
    apply(db);
  } finally {
    db.close();
  }
  return dir;
}

/**
 * The seeded log twice, once with its anchors signed under `anchorKey`, made before the file's tests
 * and removed after them: read each from inside a test or hook.
 */
export function seededLogsForFile(anchorKey: string): { plain: () => string; keyed: () => string } {
  let plain = '';
  let keyed = '';
  beforeAll(async () => {
    plain = await seededLogDir('integrity');
    keyed = await seededLogDir('integrity-key', anchorKey);
  });
  afterAll(() => {
    for (const dir of [plain, keyed]) if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return { plain: () => plain, keyed: () => keyed };
}

/** A checkpoint at the empty log: checking from it checks the whole log. */
export const genesisCheckpoint = (): VerifiedCheckpoint => ({
  format: 'recovery-ledger-verified-checkpoint',
  version: 1,
  position: 0,
  events: 0,
  log_hash: GENESIS_HASH,
  by: 'audit',
  verified_at: '2026-01-01T00:00:00.000Z',
});
