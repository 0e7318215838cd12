import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { randomInt } from 'node:crypto';
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

interface Registered {
  projection: AnyProjection;
  docsTable: string;
  linksTable: string;
  columns: string[];
  statements: {
    load: Database.Statement<[string], { doc: string; stamp: number | null }>;
    stampOf: Database.Statement<[string], { stamp: number | null }>;
    upsert: Database.Statement<unknown[]>;
    loadLink: Database.Statement<[string], { link: string }>;
    upsertLink: Database.Statement<[string, string]>;
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
  private readonly selectCache = new Map<string, Database.Statement>();
  private readonly checkpointStatements: {
    get: Database.Statement<[string], Checkpoint>;
    all: Database.Statement<[], Checkpoint>;
    upsert: Database.Statement<[string, number, number, string | null]>;
  };
  private closed = false;
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
    const readCacheBytes = options.readCacheBytes ?? 32 * 1024 * 1024;
    // The JSON's length stands for the parsed size; one document may fill at most a quarter.
    this.parsed =
      readCacheBytes > 0 ? new LRUCache({ maxSize: readCacheBytes, maxEntrySize: readCacheBytes / 4 }) : undefined;
    this.checkpointStatements = {
      get: this.db.prepare(
        'SELECT projection, version, position, recorded_at FROM projection_checkpoints WHERE projection = ?',
      ),
      all: this.db.prepare(
        'SELECT projection, version, position, recorded_at FROM projection_checkpoints ORDER BY projection',
      ),
      upsert: this.db.prepare(
        `INSERT INTO projection_checkpoints (projection, version, position, recorded_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (projection) DO UPDATE SET version = excluded.version, position = excluded.position, recorded_at = excluded.recorded_at`,
      ),
    };
  }

  /**
   * Creates the projection's tables. A projection whose version (or columns) changed since its
   * documents were written starts again from zero: old documents are not what the new code builds.
   * Answers whether it was reset.
   */
  register(projection: AnyProjection): { reset: boolean } {
    if (!NAME_PATTERN.test(projection.name))
      throw new Error(`projection name ${projection.name} must match ${NAME_PATTERN}`);
    const columns = Object.keys(projection.columns ?? {});
    for (const column of columns) {
      if (!NAME_PATTERN.test(column) || column === 'key' || column === 'doc' || column === 'stamp')
        throw new Error(`column ${column} is not allowed`);
    }
    const docsTable = `rm_${projection.name}`;
    const linksTable = `rm_${projection.name}_links`;
    const stored = this.checkpointStatements.get.get(projection.name);
    const tableInfo = this.db.prepare(`PRAGMA table_info(${docsTable})`).all() as { name: string }[];
    const existingColumns = tableInfo
      .map((row) => row.name)
      .filter((name) => name !== 'key' && name !== 'doc' && name !== 'stamp');
    const sameShape =
      tableInfo.length === 0 ||
      (existingColumns.length === columns.length && columns.every((column) => existingColumns.includes(column)));
    // Documents without a checkpoint cannot be trusted to cover any position: start them again too.
    const orphaned = stored === undefined && tableInfo.length > 0;
    const reset = (stored !== undefined && stored.version !== projection.version) || !sameShape || orphaned;
    this.db.transaction(() => {
      if (reset) this.db.exec(`DROP TABLE IF EXISTS ${docsTable}; DROP TABLE IF EXISTS ${linksTable};`);
      const columnDefs = Object.entries(projection.columns ?? {}).map(([name, type]) => `, ${name} ${sqlType(type)}`);
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${docsTable} (key TEXT PRIMARY KEY, doc TEXT NOT NULL, stamp INTEGER${columnDefs.join('')})`,
      );
      this.db.exec(`CREATE TABLE IF NOT EXISTS ${linksTable} (stream TEXT PRIMARY KEY, link TEXT NOT NULL)`);
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
      if (stored === undefined || reset)
        this.checkpointStatements.upsert.run(projection.name, projection.version, 0, null);
    })();
    const placeholders = columns.map(() => ', ?').join('');
    const updates = ['doc = excluded.doc', ...columns.map((column) => `${column} = excluded.${column}`)].join(', ');
    this.registered.set(projection.name, {
      projection,
      docsTable,
      linksTable,
      columns,
      statements: {
        load: this.db.prepare(`SELECT doc, stamp FROM ${docsTable} WHERE key = ?`),
        stampOf: this.db.prepare(`SELECT stamp FROM ${docsTable} WHERE key = ?`),
        upsert: this.db.prepare(
          `INSERT INTO ${docsTable} (key, doc, stamp${columns.map((c) => `, ${c}`).join('')}) VALUES (?, ?, ?${placeholders})
           ON CONFLICT (key) DO UPDATE SET stamp = excluded.stamp, ${updates}`,
        ),
        loadLink: this.db.prepare(`SELECT link FROM ${linksTable} WHERE stream = ?`),
        upsertLink: this.db.prepare(
          `INSERT INTO ${linksTable} (stream, link) VALUES (?, ?) ON CONFLICT (stream) DO UPDATE SET link = excluded.link`,
        ),
      },
    });
    return { reset };
  }

  private entry(name: string): Registered {
    const entry = this.registered.get(name);
    if (!entry) throw new Error(`projection ${name} is not registered`);
    return entry;
  }

  /** BEGIN IMMEDIATE: the write lock is taken up front, so a batch never fails half-way on a busy file. */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work).immediate();
  }

  checkpoint(name: string): Checkpoint {
    const row = this.checkpointStatements.get.get(name);
    if (!row) throw new Error(`projection ${name} has no checkpoint`);
    return row;
  }

  checkpoints(): Checkpoint[] {
    return this.checkpointStatements.all.all();
  }

  setCheckpoint(name: string, position: number, recordedAt: string | null): void {
    this.checkpointStatements.upsert.run(name, this.entry(name).projection.version, position, recordedAt);
  }

  loadDoc<Doc>(name: string, key: string): Doc | undefined {
    const row = this.entry(name).statements.load.get(key);
    return row ? (JSON.parse(row.doc) as Doc) : undefined;
  }

  writeDoc(name: string, key: string, doc: unknown): void {
    this.parsed?.delete(cacheKey(name, key));
    const { projection, columns, statements } = this.entry(name);
    const indexed = projection.index ? projection.index(doc) : {};
    statements.upsert.run(
      key,
      JSON.stringify(doc),
      randomInt(1, 2 ** 47),
      ...columns.map((column) => indexed[column] ?? null),
    );
  }

  link(name: string, stream: string): string | undefined {
    return this.entry(name).statements.loadLink.get(stream)?.link;
  }

  setLink(name: string, stream: string, link: string): void {
    this.entry(name).statements.upsertLink.run(stream, link);
  }

  /** Empties a projection and puts its checkpoint back to zero, in one transaction. */
  reset(name: string): void {
    this.parsed?.clear();
    const { docsTable, linksTable, projection } = this.entry(name);
    this.transaction(() => {
      this.db.prepare(`DELETE FROM ${docsTable}`).run();
      this.db.prepare(`DELETE FROM ${linksTable}`).run();
      this.checkpointStatements.upsert.run(name, projection.version, 0, null);
    });
  }

  /**
   * A document for a reader: parsed once and then served from memory until it changes. It is
   * frozen, since every later reader gets the same object.
   */
  getDoc<Doc>(name: string, key: string): Doc | undefined {
    if (!this.parsed) return this.loadDoc<Doc>(name, key);
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
      // The stamp says when this copy was written, not what it holds: two equal read models differ in it.
      const { stamp: _stamp, ...held } = row;
      yield [`doc:${String(row.key)}`, JSON.stringify(held)];
    }
    for (const row of this.db.prepare(`SELECT stream, link FROM ${linksTable} ORDER BY stream`).iterate() as Iterable<{
      stream: string;
      link: string;
    }>) {
      yield [`link:${row.stream}`, row.link];
    }
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
