import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { testReadModel } from '../contract/read-model.contract';

testReadModel('sqlite (:memory:)', () => {
  const readModel = SqliteReadModel.open({ file: ':memory:' });
  return { readModel, cleanup: () => readModel.close() };
});

testReadModel('sqlite (file, no read cache)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-read-model-contract-'));
  const readModel = SqliteReadModel.open({ file: join(dir, 'read-models.sqlite'), readCacheBytes: 0 });
  return {
    readModel,
    cleanup: () => {
      readModel.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
