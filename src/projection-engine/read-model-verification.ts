import type { AnyProjection } from '../../projections/projection';
import type { EventStore } from '../store/event-store.port';
import { yieldToEventLoop } from '../store/log-audit';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import { SqliteReadModel } from './sqlite-read-model.store';
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
 * Rebuilds each projection in memory from the log, up to the position its stored checkpoint
 * claims, and compares every stored row (documents, their index columns, stream links) with what
 * the log gives. A read model edited outside the engine (or torn by a bad disk) differs, and is
 * then rebuilt rather than served (docs/reliability.md, "A corrupted read model").
 */
export async function verifyReadModels(
  store: EventStore,
  stored: SqliteReadModel,
  projections: readonly AnyProjection[],
  { maxListed = 50 }: { maxListed?: number } = {},
): Promise<ReadModelReport> {
  const report: ReadModelReport = { ok: true, projections: [], differences: [] };
  for (const projection of projections) {
    const checkpoint = stored.checkpoint(projection.name).position;
    const fresh = SqliteReadModel.open({ file: ':memory:', readCacheBytes: 0 });
    try {
      fresh.register(projection);
      for (let after = 0; after < checkpoint; ) {
        const batch = (await store.readAll({ after, limit: BATCH, streamPrefix: OPERATION_STREAM_PREFIX })).filter((event) => event.position <= checkpoint);
        if (batch.length === 0) break;
        // A turn for the event loop between batches: the service answers while it checks.
        await yieldToEventLoop();
        const set = new ProjectionWorkingSet(projection, fresh, after);
        set.fold(batch);
        fresh.transaction(() => set.write());
        after = batch[batch.length - 1].position;
      }
      const { count, documents, listed } = compare(projection.name, stored.rowsInKeyOrder(projection.name), fresh.rowsInKeyOrder(projection.name), maxListed - report.differences.length);
      report.projections.push({ name: projection.name, checkpoint, documents, differences: count });
      if (count > 0) report.ok = false;
      report.differences.push(...listed);
    } finally {
      fresh.close();
    }
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
