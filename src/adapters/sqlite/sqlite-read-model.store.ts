import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { createHash, createHmac, randomInt } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AnyProjection, ColumnType, IndexValue } from '@recovery-ledger/projections';
import type {
  Checkpoint,
  DocRow,
  DueDepth,
  DueStep,
  DueStepsQuery,
  ReadModel,
  ReadModelOptions,
  SelectOptions,
} from '../../store/read-model.port';

export { readModelFile } from '../../store/read-model.port';
export type { Checkpoint, Condition, DocRow, ReadModelOptions, SelectOptions } from '../../store/read-model.port';

const NAME_PATTERN = /^[a-z][a-z0-9_]{0,40}$/;
const CHECKPOINTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
  projection  TEXT    PRIMARY KEY,
  version     INTEGER NOT NULL,
  position    INTEGER NOT NULL,
  recorded_at TEXT
);
`;

/** The digest of no rows: XOR over an empty set. */
const EMPTY_DIGEST = '0'.repeat(64);
const HASH_BYTES = 32;

interface Registered {
  projection: AnyProjection;
  docsTable: string;
  linksTable: string;
  columns: string[];
  statements: {
    load: Database.Statement<[string], { doc: string; stamp: number | null }>;
    stampOf: Database.Statement<[string], { stamp: number | null }>;
    rowHashOf: Database.Statement<[string], { row_hash: Buffer | null }>;
    upsert: Database.Statement<unknown[]>;
    loadLink: Database.Statement<[string], { link: string; row_hash: Buffer | null }>;
    upsertLink: Database.Statement<[string, string, Buffer]>;
  };
}

function cacheKey(name: string, key: string): string {
  return `${name}\u0000${key}`;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

/** The tables and checkpoint row a projection is rebuilt into, beside its live ones. */
function shadowNames(name: string): { docsTable: string; linksTable: string; checkpoint: string } {
  return { docsTable: `rm_${name}__next`, linksTable: `rm_${name}__next_links`, checkpoint: `${name}__next` };
}

function sqlType(type: ColumnType): string {
  return type === 'integer' ? 'INTEGER' : 'TEXT';
}

/**
 * The read model: one SQLite file (`<LEDGER_DATA_DIR>/read-models.sqlite`) holding each
 * projection's documents as JSON, the columns it indexes, the stream links it made, and its
 * checkpoint. The engine writes a batch's documents and the checkpoint in one transaction, so the
 * file never holds a document change without the checkpoint that covers it, or the reverse.
 *
 * synchronous=NORMAL in WAL mode: a power cut may lose the last few committed batches, but never
 * part of one, and a lost batch is simply projected again from the log. The log is the truth; this
 * file can always be rebuilt from it.
 */
export class SqliteReadModel implements ReadModel {
  private readonly db: Database.Database;
  private readonly registered = new Map<string, Registered>();
  /** Projections this connection is rebuilding beside their live tables (beginRebuild). */
  private readonly rebuilding = new Map<string, Registered>();
  private readonly selectCache = new Map<string, Database.Statement>();
  private readonly checkpointStatements: {
    get: Database.Statement<[string], Checkpoint>;
    all: Database.Statement<[], Checkpoint>;
    upsert: Database.Statement<[string, number, number, string | null, string | null]>;
    setDigest: Database.Statement<[string | null, string]>;
  };
  private closed = false;
  private readonly digestKey: string | undefined;
  /**
   * What the rows written in the open transaction change in each projection's digest (XOR of the
   * old rows' hashes and the new ones'), written to its checkpoint row before that transaction
   * commits, so the digest and the rows it covers land together or not at all.
   */
  private pendingDigests: Map<string, Buffer> | undefined;
  /**
   * Documents as readers last parsed them, bounded by their JSON's length: parsing a trail of 1,000
   * entries is most of what answering it costs. A copy is served while the document's stamp is the
   * one it was parsed with: any write of the document, by any connection (the projection thread,
   * another process on the file), stamps it anew or clears the stamp. Undefined when the cache is off.
   */
  private readonly parsed: LRUCache<string, { doc: object; stamp: number }> | undefined;

  static open(options: ReadModelOptions): SqliteReadModel {
    return new SqliteReadModel(options);
  }

  private constructor(options: ReadModelOptions) {
    if (options.file !== ':memory:') mkdirSync(dirname(options.file), { recursive: true });
    this.db = new Database(options.file, { timeout: options.busyTimeoutMs ?? 5000 });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(CHECKPOINTS_SCHEMA);
    this.digestKey = options.digestKey;
    const checkpointColumns = (
      this.db.prepare('PRAGMA table_info(projection_checkpoints)').all() as { name: string }[]
    ).map((row) => row.name);
    // A file written before digests were kept: its rows' digest is not known (null) until rebuilt.
    for (const column of ['event_hash', 'digest']) {
      if (checkpointColumns.includes(column)) continue;
      try {
        this.db.exec(`ALTER TABLE projection_checkpoints ADD COLUMN ${column} TEXT`);
      } catch (error) {
        if (!/duplicate column/i.test((error as Error).message)) throw error;
      }
    }
    const readCacheBytes = options.readCacheBytes ?? 32 * 1024 * 1024;
    // The JSON's length stands for the parsed size; one document may fill at most a quarter.
    this.parsed =
      readCacheBytes > 0 ? new LRUCache({ maxSize: readCacheBytes, maxEntrySize: readCacheBytes / 4 }) : undefined;
    this.checkpointStatements = {
      get: this.db.prepare(
        'SELECT projection, version, position, recorded_at, event_hash, digest FROM projection_checkpoints WHERE projection = ?',
      ),
      all: this.db.prepare(
        'SELECT projection, version, position, recorded_at, event_hash, digest FROM projection_checkpoints ORDER BY projection',
      ),
      upsert: this.db.prepare(
        `INSERT INTO projection_checkpoints (projection, version, position, recorded_at, event_hash) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (projection) DO UPDATE SET version = excluded.version, position = excluded.position,
           recorded_at = excluded.recorded_at, event_hash = excluded.event_hash`,
      ),
      setDigest: this.db.prepare('UPDATE projection_checkpoints SET digest = ? WHERE projection = ?'),
    };
  }

  /**
   * Creates the projection's tables. A projection whose version changed since its documents were
   * written keeps them, and its checkpoint keeps the version that wrote them: they are served as
   * they stand until a rebuild beside them (`beginRebuild`, `finishRebuild`) swaps in what the new
   * code builds (docs/reliability.md, "Rebuilding beside"). One whose columns changed starts again
   * from zero, since the queries of the new code filter on columns the old tables do not have.
   * Answers whether it was reset.
   */
  register(projection: AnyProjection): { reset: boolean } {
    if (!NAME_PATTERN.test(projection.name))
      throw new Error(`projection name ${projection.name} must match ${NAME_PATTERN}`);
    const columns = Object.keys(projection.columns ?? {});
    for (const column of columns) {
      if (!NAME_PATTERN.test(column) || ['key', 'doc', 'stamp', 'row_hash'].includes(column))
        throw new Error(`column ${column} is not allowed`);
    }
    const docsTable = `rm_${projection.name}`;
    const linksTable = `rm_${projection.name}_links`;
    const stored = this.checkpointStatements.get.get(projection.name);
    const tableInfo = this.db.prepare(`PRAGMA table_info(${docsTable})`).all() as { name: string }[];
    const existingColumns = tableInfo
      .map((row) => row.name)
      .filter((name) => name !== 'key' && name !== 'doc' && name !== 'stamp' && name !== 'row_hash');
    const sameShape =
      tableInfo.length === 0 ||
      (existingColumns.length === columns.length && columns.every((column) => existingColumns.includes(column)));
    // Documents without a checkpoint cannot be trusted to cover any position: start them again too.
    const orphaned = stored === undefined && tableInfo.length > 0;
    const reset = !sameShape || orphaned;
    this.db.transaction(() => {
      if (reset) this.db.exec(`DROP TABLE IF EXISTS ${docsTable}; DROP TABLE IF EXISTS ${linksTable};`);
      const columnDefs = Object.entries(projection.columns ?? {}).map(([name, type]) => `, ${name} ${sqlType(type)}`);
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${docsTable} (key TEXT PRIMARY KEY, doc TEXT NOT NULL, stamp INTEGER, row_hash BLOB${columnDefs.join('')})`,
      );
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${linksTable} (stream TEXT PRIMARY KEY, link TEXT NOT NULL, row_hash BLOB)`,
      );
      // Tables written before each row kept its hash: the digest of what they hold is not known.
      for (const table of [docsTable, linksTable]) {
        const has = (this.db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).some(
          (row) => row.name === 'row_hash',
        );
        if (has) continue;
        this.db.exec(`ALTER TABLE ${table} ADD COLUMN row_hash BLOB`);
        const held = this.db.prepare(`SELECT 1 FROM ${table} LIMIT 1`).get();
        if (held) this.checkpointStatements.setDigest.run(null, projection.name);
      }
      // Each write of a document stamps it anew (writeDoc), so a reader knows its parsed copy is
      // current from the stamp alone; a change made any other way clears the stamp (the trigger),
      // and a document without one is parsed again on every read.
      const hasStamp = (this.db.prepare(`PRAGMA table_info(${docsTable})`).all() as { name: string }[]).some(
        (row) => row.name === 'stamp',
      );
      // A file written before stamps: add the column (another connection may just have added it).
      if (!hasStamp) {
        try {
          this.db.exec(`ALTER TABLE ${docsTable} ADD COLUMN stamp INTEGER`);
        } catch (error) {
          if (!/duplicate column/i.test((error as Error).message)) throw error;
        }
      }
      this.indexAndTrigger(projection, docsTable);
      if (stored === undefined || reset) {
        this.checkpointStatements.upsert.run(projection.name, projection.version, 0, null, null);
        this.checkpointStatements.setDigest.run(EMPTY_DIGEST, projection.name);
      }
    })();
    this.registered.set(projection.name, this.tablesOf(projection, docsTable, linksTable));
    return { reset };
  }

  /** The stamp trigger (see register) and the projection's declared indexes, on its documents' table. */
  private indexAndTrigger(projection: AnyProjection, docsTable: string): void {
    const columns = Object.keys(projection.columns ?? {});
    this.db.exec(
      `CREATE TRIGGER IF NOT EXISTS ${docsTable}_unstamped AFTER UPDATE OF doc ON ${docsTable}
       WHEN NEW.stamp IS OLD.stamp BEGIN UPDATE ${docsTable} SET stamp = NULL WHERE key = NEW.key; END`,
    );
    (projection.indexes ?? []).forEach((indexColumns, index) => {
      for (const column of indexColumns) {
        if (!columns.includes(column)) throw new Error(`index of ${projection.name} names unknown column ${column}`);
      }
      this.db.exec(`CREATE INDEX IF NOT EXISTS ${docsTable}_i${index} ON ${docsTable} (${indexColumns.join(', ')})`);
    });
  }

  private tablesOf(projection: AnyProjection, docsTable: string, linksTable: string): Registered {
    const columns = Object.keys(projection.columns ?? {});
    const placeholders = columns.map(() => ', ?').join('');
    const updates = ['doc = excluded.doc', ...columns.map((column) => `${column} = excluded.${column}`)].join(', ');
    return {
      projection,
      docsTable,
      linksTable,
      columns,
      statements: {
        load: this.db.prepare(`SELECT doc, stamp FROM ${docsTable} WHERE key = ?`),
        stampOf: this.db.prepare(`SELECT stamp FROM ${docsTable} WHERE key = ?`),
        rowHashOf: this.db.prepare(`SELECT row_hash FROM ${docsTable} WHERE key = ?`),
        upsert: this.db.prepare(
          `INSERT INTO ${docsTable} (key, doc, stamp, row_hash${columns.map((c) => `, ${c}`).join('')}) VALUES (?, ?, ?, ?${placeholders})
           ON CONFLICT (key) DO UPDATE SET stamp = excluded.stamp, row_hash = excluded.row_hash, ${updates}`,
        ),
        loadLink: this.db.prepare(`SELECT link, row_hash FROM ${linksTable} WHERE stream = ?`),
        upsertLink: this.db.prepare(
          `INSERT INTO ${linksTable} (stream, link, row_hash) VALUES (?, ?, ?)
           ON CONFLICT (stream) DO UPDATE SET link = excluded.link, row_hash = excluded.row_hash`,
        ),
      },
    };
  }

  /**
   * Starts building a projection beside its live tables (docs/reliability.md, "Rebuilding beside"):
   * from here this connection's writes of it (documents, links, checkpoint, digest) go to new
   * tables, while every read still answers from the live ones, untouched, until `finishRebuild`
   * swaps them in one transaction. The new tables get the declared indexes only at the swap: a
   * rebuild only looks documents up by key.
   */
  beginRebuild(name: string, options: { resume?: boolean } = {}): void {
    const live = this.entry(name);
    const { projection } = live;
    const shadow = shadowNames(name);
    const columnDefs = Object.entries(projection.columns ?? {}).map(([column, type]) => `, ${column} ${sqlType(type)}`);
    this.transaction(() => {
      if (options.resume && this.resumable(projection, shadow)) return;
      this.db.exec(`DROP TABLE IF EXISTS ${shadow.docsTable}; DROP TABLE IF EXISTS ${shadow.linksTable};`);
      this.db.exec(
        `CREATE TABLE ${shadow.docsTable} (key TEXT PRIMARY KEY, doc TEXT NOT NULL, stamp INTEGER, row_hash BLOB${columnDefs.join('')})`,
      );
      this.db.exec(`CREATE TABLE ${shadow.linksTable} (stream TEXT PRIMARY KEY, link TEXT NOT NULL, row_hash BLOB)`);
      this.checkpointStatements.upsert.run(shadow.checkpoint, projection.version, 0, null, null);
      this.checkpointStatements.setDigest.run(EMPTY_DIGEST, shadow.checkpoint);
    });
    this.rebuilding.set(name, this.tablesOf(projection, shadow.docsTable, shadow.linksTable));
  }

  /**
   * Swaps a projection built beside (`beginRebuild`) in for its live tables, checkpoint and digest
   * included, in one transaction: a reader sees the old tables or the new, never a mix.
   */
  finishRebuild(name: string): void {
    const built = this.rebuilding.get(name);
    if (!built) return;
    const { docsTable, linksTable, projection } = this.entry(name);
    const shadow = shadowNames(name);
    this.transaction(() => {
      this.db.exec(`DROP TABLE IF EXISTS ${docsTable}; DROP TABLE IF EXISTS ${linksTable};`);
      this.db.exec(`ALTER TABLE ${shadow.docsTable} RENAME TO ${docsTable}`);
      this.db.exec(`ALTER TABLE ${shadow.linksTable} RENAME TO ${linksTable}`);
      this.indexAndTrigger(projection, docsTable);
      this.db
        .prepare(
          `INSERT OR REPLACE INTO projection_checkpoints (projection, version, position, recorded_at, event_hash, digest)
           SELECT ?, version, position, recorded_at, event_hash, digest FROM projection_checkpoints WHERE projection = ?`,
        )
        .run(name, shadow.checkpoint);
      this.db.prepare('DELETE FROM projection_checkpoints WHERE projection = ?').run(shadow.checkpoint);
    });
    this.rebuilding.delete(name);
    this.parsed?.clear();
  }

  /**
   * Whether a set built beside by an earlier run can be built on: made by this version, with these
   * columns, its checkpoint row there. Its rows and its checkpoint were committed together, like
   * the live ones', so it holds the log up to that checkpoint and no further.
   */
  private resumable(projection: AnyProjection, shadow: ReturnType<typeof shadowNames>): boolean {
    const stored = this.checkpointStatements.get.get(shadow.checkpoint);
    if (!stored || stored.version !== projection.version || typeof stored.digest !== 'string') return false;
    const docs = (this.db.prepare(`PRAGMA table_info(${shadow.docsTable})`).all() as { name: string }[]).map(
      (row) => row.name,
    );
    const links = this.db.prepare(`PRAGMA table_info(${shadow.linksTable})`).all();
    const held = docs.filter((column) => !['key', 'doc', 'stamp', 'row_hash'].includes(column));
    const columns = Object.keys(projection.columns ?? {});
    return (
      docs.length > 0 &&
      links.length > 0 &&
      held.length === columns.length &&
      columns.every((column) => held.includes(column))
    );
  }

  /**
   * Stops writing a projection beside its live tables, which stay as they are. What was built
   * beside is dropped, or with `keep` left for a later `beginRebuild(name, { resume: true })`.
   */
  abandonRebuild(name: string, options: { keep?: boolean } = {}): void {
    if (!this.rebuilding.delete(name) || options.keep) return;
    const shadow = shadowNames(name);
    this.transaction(() => {
      this.db.exec(`DROP TABLE IF EXISTS ${shadow.docsTable}; DROP TABLE IF EXISTS ${shadow.linksTable};`);
      this.db.prepare('DELETE FROM projection_checkpoints WHERE projection = ?').run(shadow.checkpoint);
    });
  }

  /** Where this connection writes a projection: beside the live tables while it rebuilds it. */
  private target(name: string): Registered {
    return this.rebuilding.get(name) ?? this.entry(name);
  }

  /** The checkpoint row a projection's writes move on this connection. */
  private checkpointRow(name: string): string {
    return this.rebuilding.has(name) ? shadowNames(name).checkpoint : name;
  }

  private entry(name: string): Registered {
    const entry = this.registered.get(name);
    if (!entry) throw new Error(`projection ${name} is not registered`);
    return entry;
  }

  /** BEGIN IMMEDIATE: the write lock is taken up front, so a batch never fails half-way on a busy file. */
  transaction<T>(work: () => T): T {
    return this.db
      .transaction(() => {
        const outer = this.pendingDigests === undefined;
        if (outer) this.pendingDigests = new Map();
        try {
          const value = work();
          if (outer) this.writeDigests();
          return value;
        } finally {
          if (outer) this.pendingDigests = undefined;
        }
      })
      .immediate();
  }

  /**
   * A row's hash: what it holds (for a document, its JSON and every index column the queries
   * filter on), under its projection's name and its key, so a row moved, edited, dropped or torn
   * changes the projection's digest. Keyed where a key is configured: without it, a digest that
   * matches edited rows cannot be made.
   */
  private rowHash(kind: 'doc' | 'link', name: string, key: string, body: string, columns: unknown[]): Buffer {
    const hash = this.digestKey ? createHmac('sha256', this.digestKey) : createHash('sha256');
    hash.update(`${kind}\n${name}\n${key.length}:${key}\n${body.length}:`);
    hash.update(body);
    hash.update(`\n${JSON.stringify(columns)}`);
    return hash.digest();
  }

  /** One row replaced by another (either may be absent): XORed into the digest of a checkpoint row. */
  private changeDigest(name: string, before: Buffer | null | undefined, after: Buffer | undefined): void {
    const delta = Buffer.alloc(HASH_BYTES);
    if (before) for (let i = 0; i < HASH_BYTES; i++) delta[i] ^= before[i];
    if (after) for (let i = 0; i < HASH_BYTES; i++) delta[i] ^= after[i];
    if (this.pendingDigests) {
      const pending = this.pendingDigests.get(name);
      if (pending) for (let i = 0; i < HASH_BYTES; i++) pending[i] ^= delta[i];
      else this.pendingDigests.set(name, delta);
      return;
    }
    this.pendingDigests = new Map([[name, delta]]);
    try {
      this.writeDigests();
    } finally {
      this.pendingDigests = undefined;
    }
  }

  private writeDigests(): void {
    for (const [name, delta] of this.pendingDigests ?? []) {
      const stored = this.checkpointStatements.get.get(name)?.digest;
      // Unknown stays unknown: only a reset (an empty projection) starts a digest.
      if (typeof stored !== 'string') continue;
      const digest = Buffer.from(stored, 'hex');
      for (let i = 0; i < HASH_BYTES; i++) digest[i] ^= delta[i];
      this.checkpointStatements.setDigest.run(digest.toString('hex'), name);
    }
  }

  checkpoint(name: string): Checkpoint {
    const row = this.checkpointStatements.get.get(this.checkpointRow(name));
    if (!row) throw new Error(`projection ${name} has no checkpoint`);
    return row;
  }

  /** The live projections' checkpoints (not those of a rebuild beside them). */
  checkpoints(): Checkpoint[] {
    return this.checkpointStatements.all.all().filter((row) => !row.projection.endsWith('__next'));
  }

  setCheckpoint(name: string, position: number, recordedAt: string | null, eventHash: string | null = null): void {
    this.checkpointStatements.upsert.run(
      this.checkpointRow(name),
      this.entry(name).projection.version,
      position,
      recordedAt,
      eventHash,
    );
  }

  loadDoc<Doc>(name: string, key: string): Doc | undefined {
    const row = this.target(name).statements.load.get(key);
    return row ? (JSON.parse(row.doc) as Doc) : undefined;
  }

  writeDoc(name: string, key: string, doc: unknown): void {
    this.parsed?.delete(cacheKey(name, key));
    const { projection, columns, statements } = this.target(name);
    const indexed = projection.index ? projection.index(doc) : {};
    const json = JSON.stringify(doc);
    const values = columns.map((column) => indexed[column] ?? null);
    const hash = this.rowHash('doc', name, key, json, values);
    const before = statements.rowHashOf.get(key)?.row_hash;
    statements.upsert.run(key, json, randomInt(1, 2 ** 47), hash, ...values);
    this.changeDigest(this.checkpointRow(name), before, hash);
  }

  link(name: string, stream: string): string | undefined {
    return this.target(name).statements.loadLink.get(stream)?.link;
  }

  setLink(name: string, stream: string, link: string): void {
    const { statements } = this.target(name);
    const hash = this.rowHash('link', name, stream, link, []);
    const before = statements.loadLink.get(stream)?.row_hash;
    statements.upsertLink.run(stream, link, hash);
    this.changeDigest(this.checkpointRow(name), before, hash);
  }

  /** Empties a projection and puts its checkpoint back to zero, in one transaction. */
  reset(name: string): void {
    this.parsed?.clear();
    const { docsTable, linksTable, projection } = this.entry(name);
    this.transaction(() => {
      this.db.prepare(`DELETE FROM ${docsTable}`).run();
      this.db.prepare(`DELETE FROM ${linksTable}`).run();
      this.checkpointStatements.upsert.run(name, projection.version, 0, null, null);
      this.pendingDigests?.delete(name);
      this.checkpointStatements.setDigest.run(EMPTY_DIGEST, name);
    });
  }

  /**
   * A document for a reader: parsed once and then served from memory until it changes. It is
   * frozen, since every later reader gets the same object.
   */
  getDoc<Doc>(name: string, key: string): Doc | undefined {
    if (!this.parsed) {
      // The live row, even while this connection rebuilds the projection beside it.
      const row = this.entry(name).statements.load.get(key);
      return row ? (JSON.parse(row.doc) as Doc) : undefined;
    }
    const id = cacheKey(name, key);
    const { statements } = this.entry(name);
    const hit = this.parsed.get(id);
    // Only this document's stamp is read: other documents written meanwhile (by the projection
    // thread, another process) leave its parsed copy valid, however large it is.
    if (hit && hit.stamp === statements.stampOf.get(key)?.stamp) return hit.doc as Doc;
    const row = statements.load.get(key);
    if (!row) return undefined;
    const doc = deepFreeze(JSON.parse(row.doc) as Doc & object);
    if (row.stamp !== null) this.parsed.set(id, { doc, stamp: row.stamp }, { size: Math.max(1, row.doc.length) });
    return doc;
  }

  /** Documents filtered and ordered by the projection's declared columns only. */
  select<Doc>(name: string, options: SelectOptions = {}): DocRow<Doc>[] {
    return this.selectRows(name, 'doc', options).map((row) => ({
      key: row.key as string,
      doc: JSON.parse(row.doc as string) as Doc,
    }));
  }

  /** Keys and indexed columns only, no document parsed: for scans that need just those. */
  private selectIndex(name: string, options: SelectOptions = {}): Array<Record<string, IndexValue>> {
    return this.selectRows(name, this.entry(name).columns.join(', '), options);
  }

  private selectRows(name: string, what: string, options: SelectOptions): Array<Record<string, IndexValue>> {
    const { docsTable, columns } = this.entry(name);
    const known = new Set(['key', ...columns]);
    const check = (column: string) => {
      if (!known.has(column)) throw new Error(`${name} has no column ${column}`);
      return column;
    };
    const clauses: string[] = [];
    const params: IndexValue[] = [];
    for (const condition of options.where ?? []) {
      if ('columns' in condition) {
        if (condition.columns.length !== condition.values.length || condition.columns.length === 0) {
          throw new Error('a row-value condition needs as many values as columns');
        }
        clauses.push(
          `(${condition.columns.map(check).join(', ')}) ${condition.op} (${condition.values.map(() => '?').join(', ')})`,
        );
        params.push(...condition.values);
      } else if (condition.op === 'contains') {
        clauses.push(`instr(lower(${check(condition.column)}), lower(?)) > 0`);
        params.push(condition.value);
      } else if (condition.op === 'in') {
        if (condition.values.length === 0) return [] as Array<Record<string, IndexValue>>;
        clauses.push(`${check(condition.column)} IN (${condition.values.map(() => '?').join(', ')})`);
        params.push(...condition.values);
      } else {
        clauses.push(`${check(condition.column)} ${condition.op} ?`);
        params.push(condition.value);
      }
    }
    const order = (options.orderBy ?? [{ column: 'key' }]).map(
      ({ column, descending }) => `${check(column)}${descending ? ' DESC' : ''}`,
    );
    const limit = options.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(options.limit))}`;
    const sql = `SELECT key, ${what} FROM ${docsTable}${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} ORDER BY ${order.join(', ')}${limit}`;
    let statement = this.selectCache.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.selectCache.set(sql, statement);
    }
    return statement.all(...params) as Array<Record<string, IndexValue>>;
  }

  /**
   * Rows matching `where`, counted per value of one declared column, with the least of another:
   * for gauges (feed depth per tool, oldest due item), without parsing a document.
   */
  private countBy(
    name: string,
    groupBy: string,
    minOf: string,
    where: ReadonlyArray<{ column: string; op: '=' | '<=' | '>='; value: IndexValue }>,
  ): Array<{ group: IndexValue; count: number; min: number | null }> {
    const { docsTable, columns } = this.entry(name);
    for (const column of [groupBy, minOf, ...where.map((condition) => condition.column)]) {
      if (!columns.includes(column)) throw new Error(`${name} has no column ${column}`);
    }
    const clauses = where.map((condition) => `${condition.column} ${condition.op} ?`).join(' AND ');
    const sql = `SELECT ${groupBy} AS grp, COUNT(*) AS count, MIN(${minOf}) AS min FROM ${docsTable}${clauses ? ` WHERE ${clauses}` : ''} GROUP BY ${groupBy}`;
    let statement = this.selectCache.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.selectCache.set(sql, statement);
    }
    return (
      statement.all(...where.map((condition) => condition.value)) as Array<{
        grp: IndexValue;
        count: number;
        min: number | null;
      }>
    ).map((row) => ({
      group: row.grp,
      count: row.count,
      min: row.min,
    }));
  }

  /** The step_state projection's columns (tenant, tool, due_ms, key, revision, operation_ref) answer the feed. */
  dueSteps(query: DueStepsQuery): DueStep[] {
    return this.selectIndex('step_state', {
      where: [
        { column: 'tenant', op: '=', value: query.tenant },
        ...(query.tools.length > 0 ? [{ column: 'tool', op: 'in' as const, values: query.tools }] : []),
        { column: 'due_ms', op: '<=', value: query.nowMs },
      ],
      orderBy: [{ column: 'due_ms' }, { column: 'key' }],
      limit: query.limit,
    }).map((row) => ({
      key: String(row.key),
      operationRef: String(row.operation_ref),
      revision: Number(row.revision),
      dueMs: Number(row.due_ms),
    }));
  }

  dueDepth(tenant: string | undefined, nowMs: number): DueDepth[] {
    return this.countBy('step_state', 'tool', 'due_ms', [
      ...(tenant === undefined ? [] : [{ column: 'tenant', op: '=' as const, value: tenant }]),
      { column: 'due_ms', op: '<=', value: nowMs },
    ]).map((row) => ({ tool: String(row.group), depth: row.count, oldestDueMs: row.min }));
  }

  /** Every stored row of a projection as written (documents and links), ordered: to compare read models. */
  dump(name: string): { docs: Array<{ key: string; doc: string }>; links: Array<{ stream: string; link: string }> } {
    const { docsTable, linksTable } = this.entry(name);
    return {
      docs: this.db.prepare(`SELECT key, doc FROM ${docsTable} ORDER BY key`).all() as Array<{
        key: string;
        doc: string;
      }>,
      links: this.db.prepare(`SELECT stream, link FROM ${linksTable} ORDER BY stream`).all() as Array<{
        stream: string;
        link: string;
      }>,
    };
  }

  /**
   * Every stored row of a projection, documents with their index columns (queries filter on them)
   * then stream links, each as [key, serialised row], in key order: one at a time, so a read model
   * of any size can be compared without holding it.
   */
  *rowsInKeyOrder(name: string): Generator<[string, string]> {
    const { docsTable, linksTable } = this.entry(name);
    for (const row of this.db.prepare(`SELECT * FROM ${docsTable} ORDER BY key`).iterate() as Iterable<
      Record<string, unknown>
    >) {
      // The stamp says when this copy was written, not what it holds: two equal read models differ in
      // it; the row's hash depends on the digest's key.
      const { stamp: _stamp, row_hash: _rowHash, ...held } = row;
      yield [`doc:${String(row.key)}`, JSON.stringify(held)];
    }
    for (const row of this.db.prepare(`SELECT stream, link FROM ${linksTable} ORDER BY stream`).iterate() as Iterable<{
      stream: string;
      link: string;
    }>) {
      yield [`link:${row.stream}`, row.link];
    }
  }

  /**
   * Pages through the rows in key order (a page per step, no statement left open between steps,
   * so the caller may yield to its event loop and this connection still answers other reads).
   */
  *recomputeDigest(name: string, pageRows = 2000): Generator<number, { digest: string; rows: number }> {
    const { docsTable, linksTable, columns } = this.entry(name);
    const digest = Buffer.alloc(HASH_BYTES);
    let rows = 0;
    const add = (hash: Buffer) => {
      for (let i = 0; i < HASH_BYTES; i++) digest[i] ^= hash[i];
      rows += 1;
    };
    const docsPage = this.db
      .prepare(
        `SELECT key, doc${columns.map((column) => `, ${column}`).join('')} FROM ${docsTable} WHERE key > ? ORDER BY key LIMIT ?`,
      )
      .raw();
    for (let after = ''; ;) {
      const page = docsPage.all(after, pageRows) as unknown[][];
      for (const [key, doc, ...values] of page) add(this.rowHash('doc', name, String(key), String(doc), values));
      if (page.length < pageRows) break;
      after = String(page[page.length - 1][0]);
      yield rows;
    }
    const linksPage = this.db
      .prepare(`SELECT stream, link FROM ${linksTable} WHERE stream > ? ORDER BY stream LIMIT ?`)
      .raw();
    for (let after = ''; ;) {
      const page = linksPage.all(after, pageRows) as Array<[string, string]>;
      for (const [stream, link] of page) add(this.rowHash('link', name, stream, link, []));
      if (page.length < pageRows) break;
      after = page[page.length - 1][0];
      yield rows;
    }
    return { digest: digest.toString('hex'), rows };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  get isOpen(): boolean {
    return !this.closed;
  }
}
