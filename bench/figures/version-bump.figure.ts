/**
 * Whether a projection's new version is built beside its live tables (docs/scaling.md, "Where the
 * next limits are"): a read model is built on a short log, closed, and opened again with one
 * projection's version raised, as a deploy of new projection code does; the rows of that projection
 * still answered before the engine rebuilds it are counted. Served beside, every one answers until
 * the rebuild swaps in; dropped, none does.
 */
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { ledgerOver, runOperation } from '../ledger-workload';

export interface VersionBump {
  projection: string;
  /** Rows of the projection before the version was raised. */
  rowsBefore: number;
  /** Of those, the rows still answered once the read model is opened with the new version. */
  rowsServed: number;
}

export async function versionBumpFigure(dir: string, operations = 40): Promise<VersionBump> {
  const store = SqliteEventStore.open({ file: join(dir, 'version-bump-events.sqlite') });
  const file = join(dir, 'version-bump-read-models.sqlite');
  try {
    const ledger = ledgerOver(store);
    for (let n = 0; n < operations; n++) await runOperation(ledger, n, 'acme');
    const built = SqliteReadModel.open({ file });
    await new ProjectionEngine({ store, readModel: built, projections: LEDGER_PROJECTIONS }).rebuild();
    const projection = LEDGER_PROJECTIONS[0];
    const keys = built.dump(projection.name).docs.map((row) => row.key);
    built.close();
    const bumped = SqliteReadModel.open({ file });
    try {
      bumped.register({ ...projection, version: projection.version + 1 });
      const served = keys.filter((key) => bumped.loadDoc(projection.name, key) !== undefined).length;
      return { projection: projection.name, rowsBefore: keys.length, rowsServed: served };
    } finally {
      bumped.close();
    }
  } finally {
    await store.close();
  }
}
