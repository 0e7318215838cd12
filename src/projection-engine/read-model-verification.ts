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
      const differences = compare(projection.name, stored.dumpRows(projection.name), fresh.dumpRows(projection.name));
      report.projections.push({ name: projection.name, checkpoint, documents: stored.dumpRows(projection.name).docs.length, differences: differences.length });
      if (differences.length > 0) report.ok = false;
      report.differences.push(...differences.slice(0, Math.max(0, maxListed - report.differences.length)));
    } finally {
      fresh.close();
    }
  }
  return report;
}

type Dump = ReturnType<SqliteReadModel['dumpRows']>;

function compare(projection: string, stored: Dump, expected: Dump): ReadModelDifference[] {
  const differences: ReadModelDifference[] = [];
  const rows = (dump: Dump) =>
    new Map<string, string>([
      ...dump.docs.map((row) => [String(row.key), JSON.stringify(row)] as const),
      ...dump.links.map((row) => [`link:${row.stream}`, row.link] as const),
    ]);
  const have = rows(stored);
  const want = rows(expected);
  for (const [key, row] of want) {
    if (!have.has(key)) differences.push({ projection, key, kind: 'missing' });
    else if (have.get(key) !== row) differences.push({ projection, key, kind: 'differs' });
  }
  for (const key of have.keys()) if (!want.has(key)) differences.push({ projection, key, kind: 'unexpected' });
  return differences;
}
