import type { IndexValue } from './projection';

/*
 * What a read model's queries read through: its documents by key, or filtered and ordered by the
 * projection's declared columns. The store's port (src/store/read-model.port.ts) is this and the
 * engine's writing side; its adapters are what the server hands the queries.
 */

export type Condition =
  | { column: string; op: '=' | '!=' | '<' | '<=' | '>' | '>='; value: IndexValue }
  | { column: string; op: 'in'; values: readonly IndexValue[] }
  /** Case-insensitive substring (ASCII case folding, SQLite's lower()): text search on a column. */
  | { column: string; op: 'contains'; value: string }
  /** A row-value comparison, `(a, b) > (?, ?)`: the keyset cursor of an ordered list. */
  | { columns: readonly string[]; op: '>' | '<'; values: readonly IndexValue[] };

export interface SelectOptions {
  where?: readonly Condition[];
  orderBy?: readonly { column: string; descending?: boolean }[];
  limit?: number;
}

export interface DocRow<Doc> {
  key: string;
  doc: Doc;
}

export interface ReadModelReader {
  /** A document for a reader: may be shared and is frozen. */
  getDoc<Doc>(name: string, key: string): Doc | undefined;
  /** Documents filtered and ordered by the projection's declared columns only. */
  select<Doc>(name: string, options?: SelectOptions): DocRow<Doc>[];
}

/** Read-your-writes: wait until the projection has applied the log this far, for at most `waitTimeoutMs`. */
export interface ReadPosition {
  waitForPosition?: number;
  waitTimeoutMs?: number;
}

/**
 * Where a query reads (docs/contract.md §5, §9): the read model, the caller's tenant (every key and
 * the tenant column are scoped by it, so another tenant's operation or run is not found rather than
 * forbidden), the position the projection had reached, and the ledger's clock (ages are judged by
 * it, never the client's: docs/contract.md §4).
 */
export interface QueryScope {
  readModel: ReadModelReader;
  tenant: string;
  asOf: number;
  clock: { now(): Date };
}
