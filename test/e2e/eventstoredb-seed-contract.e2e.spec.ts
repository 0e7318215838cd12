/**
 * The contract table (docs/contract.md §4) and the stream-as-source-of-truth rows (core-seed-contract), run
 * unchanged against the built service started with LEDGER_STORE=eventstoredb on the EventStoreDB
 * protocol double (test/support/eventstoredb-protocol-double): the same HTTP scenarios as on SQLite.
 * Only the store differs; the rows that check "nothing was stored" read `$all` through the port.
 */
import { e2eStore, useE2eStore, type EventStoreDbSetup } from '../support/store-setup';

useE2eStore('eventstoredb');
// The same suite again, registered after the store is chosen: a static import would run it first.
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./core-seed-contract.e2e.spec');

describe('the store under the rows above', () => {
  test('was the protocol double: the service appended and read over gRPC, and every stream is one operation', async () => {
    const { double, store } = e2eStore() as EventStoreDbSetup;
    expect(double.callCounts.Append).toBeGreaterThan(50);
    expect(double.callCounts.Read).toBeGreaterThan(50);
    // The projection engine follows the log with a subscription to $all.
    expect(double.callCounts.Subscribe).toBeGreaterThan(0);
    const log = await store.readAll({ after: 0, limit: 100_000 });
    expect(log.length).toBeGreaterThan(100);
    expect(log.every((event) => event.stream.startsWith('op-default:'))).toBe(true);
  });
});
