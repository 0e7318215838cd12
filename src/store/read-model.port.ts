import { join } from 'node:path';
import type { AnyProjection, ReadModelReader } from '@recovery-ledger/projections';

export type { Condition, DocRow, SelectOptions } from '@recovery-ledger/projections';

/** Where an instance keeps its read models: a disposable cache beside its data, rebuilt from the log. */
export function readModelFile(dataDir: string): string {
  return join(dataDir, 'read-models.sqlite');
}

export interface ReadModelOptions {
  /** A file path, or ':memory:'. */
  file: string;
  busyTimeoutMs?: number;
  /** Bytes of document JSON whose parsed form readers keep (default 32 MB; 0: none). */
  readCacheBytes?: number;
  /**
   * The key of the rows' digest (LEDGER_ANCHOR_KEY where one is set): HMAC-SHA256 with it, a plain
   * SHA-256 without. Every connection that writes the read model must use the same one.
   */
  digestKey?: string;
}

export interface Checkpoint {
  projection: string;
  version: number;
  /** The last log position applied (0: nothing yet). */
  position: number;
  /** recorded_at of the event at `position`, for lag in time. */
  recorded_at: string | null;
  /** The hash of the event at `position` as the log stored it (null: not known). */
  event_hash?: string | null;
  /**
   * The digest of every row the projection holds (hex, XOR of each row's keyed hash), kept in the
   * transaction that writes them; null when rows were written before digests were kept.
   */
  digest?: string | null;
}

/** Which due steps a worker may be handed (docs/work-feed.md). */
export interface DueStepsQuery {
  tenant: string;
  /** Only these tools; all when empty. */
  tools: readonly string[];
  /** Due at or before this instant. */
  nowMs: number;
  limit: number;
}

/** A step due for work, as the feed needs it to try a lease: no document parsed. */
export interface DueStep {
  /** The step's projection key (tenant-scoped operation_ref), which is also its lease key. */
  key: string;
  operationRef: string;
  /** The step's stream revision when it was projected: a later one may be due again. */
  revision: number;
  dueMs: number;
}

/** Due steps of one tool and the oldest due instant among them: the feed's gauges. */
export interface DueDepth {
  tool: string;
  depth: number;
  oldestDueMs: number | null;
}

/**
 * The read model: the projections' documents, the stream links they made and their checkpoints,
 * a disposable cache rebuilt from the log (docs/architecture.md). The engine writes through it, the
 * query service reads documents by the projections' declared columns, the work feed asks for due
 * steps by meaning. `test/contract/read-model.contract.ts` is what every adapter must pass.
 */
export interface ReadModel extends ReadModelReader {
  /**
   * Creates a projection's storage. A changed column set starts it again from zero; a changed
   * version keeps the rows and the checkpoint (with the version that wrote them) until a rebuild
   * beside them swaps in the new version's.
   */
  register(projection: AnyProjection): { reset: boolean };
  /** Runs `work` as one write: its documents, links and checkpoint land together or not at all. */
  transaction<T>(work: () => T): T;
  checkpoint(name: string): Checkpoint;
  checkpoints(): Checkpoint[];
  /** `eventHash`: the stored hash of the event at `position`, what a later start compares with the log. */
  setCheckpoint(name: string, position: number, recordedAt: string | null, eventHash?: string | null): void;
  /** A document as stored, parsed afresh: for the engine, which mutates what it folds. */
  loadDoc<Doc>(name: string, key: string): Doc | undefined;
  writeDoc(name: string, key: string, doc: unknown): void;
  link(name: string, stream: string): string | undefined;
  setLink(name: string, stream: string, link: string): void;
  /** Empties a projection and puts its checkpoint back to zero. */
  reset(name: string): void;
  /**
   * Rebuilding beside the live tables: after `beginRebuild` this connection's writes of the
   * projection (and `checkpoint(name)`) go to a new, empty set, while reads still answer from the
   * live one; `finishRebuild` swaps the new set in, checkpoint and digest included, in one
   * transaction; `abandonRebuild` drops it and leaves the live set as it was. With `resume`, a set
   * an earlier run left beside (`abandonRebuild` with `keep`, or a crash) by the same version is
   * built on from its own checkpoint instead of from zero.
   */
  beginRebuild(name: string, options?: { resume?: boolean }): void;
  finishRebuild(name: string): void;
  abandonRebuild(name: string, options?: { keep?: boolean }): void;
  /** The tenant's steps due by `nowMs`, soonest first (then by key), at most `limit`. */
  dueSteps(query: DueStepsQuery): DueStep[];
  /** Due steps per tool, of one tenant or of all. */
  dueDepth(tenant: string | undefined, nowMs: number): DueDepth[];
  /** Every stored row of a projection, ordered: to compare read models. */
  dump(name: string): { docs: Array<{ key: string; doc: string }>; links: Array<{ stream: string; link: string }> };
  /** The same rows one at a time, as [key, serialised row], in key order. */
  rowsInKeyOrder(name: string): Generator<[string, string]>;
  /**
   * The digest of the rows as they are stored now, each row hashed again from what it holds (its
   * document, its index columns, its links): what `checkpoint(name).digest` says when no row was
   * changed but by the engine. Reads every row of the projection, none of the log, a page at a
   * time: each step yields the rows hashed so far, and the last returns the digest.
   */
  recomputeDigest(name: string): Generator<number, { digest: string; rows: number }>;
  close(): void;
  readonly isOpen: boolean;
}
