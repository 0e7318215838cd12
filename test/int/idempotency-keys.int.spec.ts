/**
 * The Idempotency-Key contract (test/contract/idempotency-keys.contract.ts) on every store: a
 * SQLite file of the data directory, and a table of a PostgreSQL database (test/support/postgres.ts)
 * where a second keeper is another instance sharing the answers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresIdempotencyKeyStore } from '../../src/adapters/postgres/postgres-idempotency-key-store.adapter';
import { IdempotencyKeys } from '../../src/http/idempotency-keys';
import { testIdempotencyKeys } from '../contract/idempotency-keys.contract';
import { describeWithPostgres } from '../support/postgres';

testIdempotencyKeys('sqlite (a file of the data directory)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'idempotency-keys-'));
  return {
    open: () => new IdempotencyKeys(dir),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describeWithPostgres('PostgreSQL Idempotency-Key answers', (database) => {
  testIdempotencyKeys('postgres (a table every instance shares)', async () => {
    // Each test starts from no kept answers: the keys are the same across tests.
    const reset = new PostgresIdempotencyKeyStore({ connectionString: database().url });
    await reset.expire(Number.MAX_SAFE_INTEGER);
    await reset.close();
    return {
      open: () => new IdempotencyKeys(new PostgresIdempotencyKeyStore({ connectionString: database().url })),
      cleanup: async () => undefined,
    };
  });
});
