import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AnyProjection } from '@recovery-ledger/projections';
import type { EventStore } from '../store/event-store.port';
import { yieldToEventLoop } from '../integrity/log-audit';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import type { ReadModel } from '../store/read-model.port';
import { openReadModel } from '../adapters/store.factory';
import { ProjectionWorkingSet } from './working-set';

export interface ReadModelDifference {
  projection: string;
  /** A document key, or `link:<stream>` for a stream link, or `checkpoint`. */
  key: string;
  kind: 'missing' | 'unexpected' | 'differs';
}

export interface ReadModelReport {
  ok: boolean;
  projections: Array<{ name: string; checkpoint: number; documents: number; differences: number }>;
  /** The first differences found (at most `maxListed` of them). */
  differences: ReadModelDifference[];
}

const BATCH = 1000;

/**
 * Rebuilds each projection from the log, up to the position its stored checkpoint claims, and
 * compares every stored row (documents, their index columns, stream links) with what the log gives.
 * A read model edited outside the engine (or torn by a bad disk) differs, and is then rebuilt rather
 * than served (docs/reliability.md, "A corrupted read model").
 *
 * The rebuilt copies are scratch files under `scratchDir` (TMPDIR by default), removed afterwards:
 * a read model grows with the log (the evidence trail keeps every event), so a copy in memory would
 * make the service's resident set grow with it. One pass over the log feeds every projection.
 */
export async function verifyReadModels(
  store: EventStore,
  stored: ReadModel,
  projections: readonly AnyProjection[],
  { maxListed = 50, scratchDir = tmpdir() }: { maxListed?: number; scratchDir?: string } = {},
): Promise<ReadModelReport> {
  const report: ReadModelReport = { ok: true, projections: [], differences: [] };
  const scratch = mkdtempSync(join(scratchDir, 'recovery-ledger-verify-'));
  const rebuilt: Array<{ projection: AnyProjection; fresh: ReadModel; checkpoint: number }> = [];
  try {
    for (const projection of projections) {
      const fresh = openReadModel({ file: join(scratch, `${projection.name}.sqlite`), readCacheBytes: 0 });
      rebuilt.push({ projection, fresh, checkpoint: stored.checkpoint(projection.name).position });
      fresh.register(projection);
    }
    const until = Math.max(0, ...rebuilt.map((entry) => entry.checkpoint));
    for (let after = 0; after < until;) {
      const batch = await store.readAll({ after, limit: BATCH, streamPrefix: OPERATION_STREAM_PREFIX });
      if (batch.length === 0) break;
      // A turn for the event loop between batches: the service answers while it checks.
      await yieldToEventLoop();
      for (const { projection, fresh, checkpoint } of rebuilt) {
        const mine = batch.filter((event) => event.position <= checkpoint);
        if (mine.length === 0) continue;
        const set = new ProjectionWorkingSet(projection, fresh, after);
        set.fold(mine);
        fresh.transaction(() => set.write());
      }
      after = batch[batch.length - 1].position;
    }
    for (const { projection, fresh, checkpoint } of rebuilt) {
      const { count, documents, listed } = compare(
        projection.name,
        stored.rowsInKeyOrder(projection.name),
        fresh.rowsInKeyOrder(projection.name),
        maxListed - report.differences.length,
      );
      report.projections.push({ name: projection.name, checkpoint, documents, differences: count });
      if (count > 0) report.ok = false;
      report.differences.push(...listed);
    }
  } finally {
    for (const { fresh } of rebuilt) fresh.close();
    rmSync(scratch, { recursive: true, force: true });
  }
  return report;
}

/**
 * A merge of two key-ordered row streams: counts what is missing, unexpected or different, and
 * keeps the first `room` of them; neither side is ever held whole.
 */
function compare(
  projection: string,
  storedRows: Iterator<[string, string]>,
  expectedRows: Iterator<[string, string]>,
  room: number,
): { count: number; documents: number; listed: ReadModelDifference[] } {
  const listed: ReadModelDifference[] = [];
  let count = 0;
  let documents = 0;
  const note = (key: string, kind: ReadModelDifference['kind']) => {
    count += 1;
    if (listed.length < room) listed.push({ projection, key: key.startsWith('doc:') ? key.slice(4) : key, kind });
  };
  let have = storedRows.next();
  let want = expectedRows.next();
  while (!have.done || !want.done) {
    if (want.done || (!have.done && have.value[0] < want.value[0])) {
      if (have.value[0].startsWith('doc:')) documents += 1;
      note(have.value[0], 'unexpected');
      have = storedRows.next();
    } else if (have.done || want.value[0] < have.value[0]) {
      note(want.value[0], 'missing');
      want = expectedRows.next();
    } else {
      if (have.value[0].startsWith('doc:')) documents += 1;
      if (have.value[1] !== want.value[1]) note(have.value[0], 'differs');
      have = storedRows.next();
      want = expectedRows.next();
    }
  }
  return { count, documents, listed };
}

/** Why a projection's stored rows are not trusted as they stand. */
export type DigestMismatch =
  /** Written before digests were kept, or its checkpoint names no event hash. */
  | 'unknown'
  /** The log holds no event at its position, or another one than the projection applied. */
  | 'event'
  /** Its rows, hashed again, do not give the digest committed with them. */
  | 'digest';

export interface DigestReport {
  projections: Array<{ name: string; position: number; rows: number; mismatch?: DigestMismatch }>;
  /** Events read from the log: at most one per projection, whatever the log's length. */
  eventsRead: number;
  /** Rows of the read model hashed again. */
  rowsRead: number;
}

/**
 * Compares each projection with the log by its checkpoint instead of rebuilding it
 * (docs/reliability.md, "A corrupted read model"): the event at the projection's position must be
 * the one it applied (its stored hash, which the log's hash chain and the verified checkpoint
 * vouch for), and its rows, hashed again, must give the digest committed in the same transaction
 * as they were. A projection that holds is trusted up to its position and only catches up from
 * there; one that does not is rebuilt. An edit, a dropped or added row, a torn page or a read
 * model copied from another log each fail one of the two; the row pass reads the read model
 * once, a page at a time with a turn for the event loop between pages, and none of the log.
 */
export async function checkReadModelDigests(
  store: EventStore,
  readModel: ReadModel,
  projections: readonly AnyProjection[],
): Promise<DigestReport> {
  const report: DigestReport = { projections: [], eventsRead: 0, rowsRead: 0 };
  for (const projection of projections) {
    const checkpoint = readModel.checkpoint(projection.name);
    const entry = { name: projection.name, position: checkpoint.position, rows: 0 };
    const mismatch = await (async (): Promise<DigestMismatch | undefined> => {
      // Rows another version wrote are checked as what they are: they are served until the engine
      // has built the new version beside them (docs/reliability.md, "Rebuilding beside").
      if (typeof checkpoint.digest !== 'string') return 'unknown';
      if (checkpoint.position > 0) {
        if (!checkpoint.event_hash) return 'unknown';
        const [event] = await store.readAll({ after: checkpoint.position - 1, limit: 1 });
        if (event) report.eventsRead += 1;
        if (event?.position !== checkpoint.position || event.metadata.hash !== checkpoint.event_hash) return 'event';
      }
      const pages = readModel.recomputeDigest(projection.name);
      for (let step = pages.next(); ; step = pages.next()) {
        if (step.done) {
          entry.rows = step.value.rows;
          return step.value.digest === checkpoint.digest ? undefined : 'digest';
        }
        await yieldToEventLoop();
      }
    })();
    report.rowsRead += entry.rows;
    report.projections.push(mismatch ? { ...entry, mismatch } : entry);
  }
  return report;
}
