/**
 * The webhook store contract (test/contract/webhook-store.contract.ts) on every adapter: SQLite, a
 * file of one instance, reopened as a restart; PostgreSQL, with two stores on one database standing
 * for two instances (test/support/postgres.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteWebhookStore } from '../../src/adapters/sqlite/sqlite-webhook.store';
import { PostgresWebhookStore } from '../../src/adapters/postgres/postgres-webhook-store.adapter';
import { testWebhookStore } from '../contract/webhook-store.contract';
import { describeWithPostgres } from '../support/postgres';

testWebhookStore('sqlite (a file of one instance)', { shared: false }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-webhook-store-'));
  return {
    open: async () => new SqliteWebhookStore(join(dir, 'webhooks.sqlite')),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describeWithPostgres('PostgreSQL webhook store', (database) => {
  testWebhookStore('postgres (two stores on one database)', { shared: true }, async () => {
    const stores: PostgresWebhookStore[] = [];
    return {
      open: async () => {
        const store = await PostgresWebhookStore.open({ connectionString: database().url });
        stores.push(store);
        return store;
      },
      // Every case starts from empty tables: the database is the file's, shared by its cases.
      cleanup: async () => {
        await Promise.all(stores.map((store) => store.close()));
        const { Client } = await import('pg');
        const client = new Client({ connectionString: database().url });
        await client.connect();
        await client.query(
          `TRUNCATE ledger_webhook_subscriptions, ledger_webhook_deliveries, ledger_webhook_watches,
             ledger_webhook_premature; UPDATE ledger_webhook_checkpoint SET position = 0`,
        );
        await client.end();
      },
    };
  });
});
