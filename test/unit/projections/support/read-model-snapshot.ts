import type { AnyProjection, ProjectedEvent } from '@recovery-ledger/projections';
import type { SqliteReadModel } from '../../../../src/adapters/sqlite/sqlite-read-model.store';
import { foldProjection } from '../../../../projections/test/support/fold-projection';

export type Snapshot = Record<
  string,
  { docs: Array<{ key: string; doc: string }>; links: Array<{ stream: string; link: string }> }
>;

/** Every projection's stored rows, as written: two read models are equal when these are. */
export function snapshot(readModel: SqliteReadModel, projections: readonly AnyProjection[]): Snapshot {
  return Object.fromEntries(projections.map((projection) => [projection.name, readModel.dump(projection.name)]));
}

/** What the read model must hold for this log: the in-memory reference fold, serialised the same way. */
export function expectedSnapshot(projections: readonly AnyProjection[], log: readonly ProjectedEvent[]): Snapshot {
  return Object.fromEntries(
    projections.map((projection) => {
      const { docs, links } = foldProjection(projection, log);
      const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
      return [
        projection.name,
        {
          docs: [...docs].map(([key, doc]) => ({ key, doc: JSON.stringify(doc) })).sort(byKey),
          links: projection.linkOf
            ? [...links]
                .map(([stream, link]) => ({ stream, link }))
                .sort((a, b) => byKey({ key: a.stream }, { key: b.stream }))
            : [],
        },
      ];
    }),
  );
}
