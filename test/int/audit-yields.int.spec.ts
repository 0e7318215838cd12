/**
 * A whole-log audit and the read-model check on a synchronous store give the event loop turns while
 * they run, so a service checking a long log at start still answers requests (docs/reliability.md).
 */
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { verifyReadModels } from '../../src/projection-engine/read-model-verification';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

async function turnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  const before = turns;
  await work();
  running = false;
  return turns - before;
}

describe('checks of a long log leave the event loop turning', () => {
  let store: SqliteEventStore;
  beforeAll(async () => {
    store = SqliteEventStore.open({ file: ':memory:' });
    for (let i = 0; i < 600; i++) {
      const stream = `op-acme:run/op_${i}`;
      await store.append(
        stream,
        NO_STREAM,
        sealEvents(stream, undefined, [newEvent('A'), newEvent('B'), newEvent('C'), newEvent('D')]),
      );
    }
  });
  afterAll(() => store.close());

  it('the audit of 2,400 events in 600 streams', async () => {
    const turns = await turnsDuring(() => auditLog(store));
    expect(turns).toBeGreaterThan(2);
  });

  it('a turn at least every 250 events hashed, however the events fall into streams', async () => {
    const long = SqliteEventStore.open({ file: ':memory:' });
    try {
      // 40 streams of 100 events: few streams, many events each.
      for (let i = 0; i < 40; i++) {
        const stream = `op-acme:run/long_${i}`;
        await long.append(
          stream,
          NO_STREAM,
          sealEvents(
            stream,
            undefined,
            Array.from({ length: 100 }, () => newEvent('A')),
          ),
        );
      }
      const turns = await turnsDuring(() => auditLog(long));
      expect(turns).toBeGreaterThanOrEqual(4_000 / 250);
    } finally {
      await long.close();
    }
  });

  it('the read-model check', async () => {
    const readModel = SqliteReadModel.open({ file: ':memory:', readCacheBytes: 0 });
    for (const projection of LEDGER_PROJECTIONS) {
      readModel.register(projection);
      readModel.setCheckpoint(projection.name, 2_400, null);
    }
    const turns = await turnsDuring(() => verifyReadModels(store, readModel, LEDGER_PROJECTIONS));
    readModel.close();
    expect(turns).toBeGreaterThan(2);
  });
});
