/**
 * The read-model check rebuilds each projection into scratch files, not into memory (a read model
 * grows with the log), and leaves nothing behind, whether the read model holds or not
 * (docs/reliability.md, "A corrupted read model").
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { verifyReadModels } from '../../src/projection-engine/read-model-verification';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

/** Every file under a directory, with its size, however deep. */
function filesUnder(dir: string): Array<{ path: string; bytes: number }> {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => ({ path, bytes: statSync(path).size }));
}

describe('the read-model check works in scratch files', () => {
  let store: SqliteEventStore;
  let scratchDir: string;
  beforeAll(async () => {
    store = SqliteEventStore.open({ file: ':memory:' });
    for (let i = 0; i < 300; i++) {
      const stream = `op-acme:run/op_${i}`;
      await store.append(stream, NO_STREAM, sealEvents(stream, undefined, [newEvent('A'), newEvent('B')]));
    }
  });
  beforeEach(() => (scratchDir = mkdtempSync(join(tmpdir(), 'ledger-scratch-test-'))));
  afterEach(() => rmSync(scratchDir, { recursive: true, force: true }));
  afterAll(() => store.close());

  async function builtReadModel(): Promise<SqliteReadModel> {
    const readModel = SqliteReadModel.open({ file: ':memory:', readCacheBytes: 0 });
    const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS });
    await engine.rebuild();
    return readModel;
  }

  it('holds the rebuilt copies on disk while it runs, and removes them when the read model holds', async () => {
    const readModel = await builtReadModel();
    const seen: Array<{ path: string; bytes: number }> = [];
    let running = true;
    const look = () => {
      if (!running) return;
      seen.push(...filesUnder(scratchDir));
      setImmediate(look);
    };
    setImmediate(look);
    const report = await verifyReadModels(store, readModel, LEDGER_PROJECTIONS, { scratchDir });
    running = false;
    readModel.close();
    expect(report.ok).toBe(true);
    const projectionFiles = new Set(
      seen.filter((file) => file.path.endsWith('.sqlite')).map((file) => file.path.split('/').pop()),
    );
    expect([...projectionFiles].sort()).toEqual(
      LEDGER_PROJECTIONS.map((projection) => `${projection.name}.sqlite`).sort(),
    );
    expect(seen.some((file) => file.bytes > 0)).toBe(true);
    expect(readdirSync(scratchDir)).toEqual([]);
  });

  it('removes them when the read model differs too', async () => {
    const readModel = await builtReadModel();
    const [first] = LEDGER_PROJECTIONS;
    readModel.transaction(() => readModel.writeDoc(first.name, 'written-outside-the-engine', { forged: true }));
    const report = await verifyReadModels(store, readModel, LEDGER_PROJECTIONS, { scratchDir });
    readModel.close();
    expect(report.ok).toBe(false);
    expect(readdirSync(scratchDir)).toEqual([]);
  });
});
