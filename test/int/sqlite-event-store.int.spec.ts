import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { testEventStore } from '../contract/event-store.contract';

testEventStore('sqlite (:memory:)', async () => {
  const store = SqliteEventStore.open({ file: ':memory:' });
  return { store, cleanup: () => store.close() };
});

testEventStore('sqlite (file, WAL)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-contract-'));
  const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
  return {
    store,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

testEventStore('sqlite (file, group commit off)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-contract-'));
  const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), groupCommit: false });
  return {
    store,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
