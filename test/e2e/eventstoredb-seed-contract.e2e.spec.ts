/**
 * The seed's contract-test table and the stream-as-source-of-truth rows (core-seed-contract), run
 * unchanged against the built service started with LEDGER_STORE=eventstoredb on the EventStoreDB
 * protocol double (test/support/eventstoredb-protocol-double): the same HTTP scenarios as on SQLite.
 * Only the store differs; the rows that check "nothing was stored" read `$all` through the port.
 */
import { useE2eStore } from '../support/store-setup';

useE2eStore('eventstoredb');
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./core-seed-contract.e2e.spec');
