/**
 * The built service on a cluster connection string (three protocol doubles, gossip discovery),
 * over HTTP: while no node can be discovered a submit answers a typed `503 STORE_UNAVAILABLE` with
 * `Retry-After` (the client's "Failed to discover after N attempts."), and heals once a leader is
 * elected; after a failover submits go on without an error; an operation whose stream someone
 * soft-deleted answers `HISTORY_INTEGRITY_FAILED`, and is neither read as new nor continued.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDBClient } from '@eventstore/db-client';
import { operationStream } from '../../src/store/stream-names';
import { EventStoreDbProtocolCluster } from '../support/eventstoredb-protocol-double';
import { fact, ledgerAt, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const TENANT = 'default'; // local mode
let cluster: EventStoreDbProtocolCluster;
let ledger: LedgerProcess;
let api: ReturnType<typeof ledgerAt>;

const planned = () =>
  fact('StepPlanned', { run_id: 'run_c', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' });
const newRef = () => `run_${randomUUID().slice(0, 8)}/step_1`;

beforeAll(async () => {
  cluster = await EventStoreDbProtocolCluster.start();
  ledger = await startLedger({
    env: { LEDGER_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: cluster.connectionString },
  });
  api = ledgerAt(ledger.baseUrl);
});

afterEach(() => {
  cluster.electLeader(0);
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  await cluster?.stop();
});

function expectStoreUnavailable(answer: HttpAnswer): void {
  expect({ status: answer.status, code: answer.body?.code }).toEqual({ status: 503, code: 'STORE_UNAVAILABLE' });
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
  expect(JSON.stringify(answer.body)).not.toMatch(/discover|grpc|esdb:|stack/i);
}

test('while no node can be discovered, a submit answers 503 STORE_UNAVAILABLE with Retry-After, and heals after an election', async () => {
  const ref = newRef();
  const events = [planned()];
  cluster.startElection();
  // The first call may meet the old leader refusing ("not ready"); the next ones rediscover and fail.
  for (let attempt = 0; attempt < 3; attempt++) expectStoreUnavailable(await api.submit(ref, events));
  cluster.electLeader(1);
  const healed = await api.submit(ref, events);
  expect(healed.status).toBe(200);
  expect(cluster.nodes[1].callCounts.Append).toBeGreaterThan(0);
});

test('after a failover, submits go on with no error reaching the caller', async () => {
  const ref = newRef();
  expect((await api.submit(ref, [planned()])).status).toBe(200);
  cluster.electLeader(2);
  const next = await api.submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' })]);
  expect(next.status).toBe(200);
  expect((await api.state(ref)).status).toBe(200);
});

test('an operation whose stream was soft-deleted answers HISTORY_INTEGRITY_FAILED and is not continued', async () => {
  const ref = newRef();
  expect((await api.submit(ref, [planned()])).status).toBe(200);
  const stored = () => cluster.log.events.filter((event) => event.stream === operationStream(TENANT, ref)).length;
  const before = stored();
  const client = EventStoreDBClient.connectionString(cluster.connectionString);
  try {
    await client.deleteStream(operationStream(TENANT, ref));
  } finally {
    await client.dispose();
  }
  const refused = await api.submit(ref, [planned()]);
  expect({ status: refused.status, code: refused.body?.code }).toEqual({
    status: 500,
    code: 'HISTORY_INTEGRITY_FAILED',
  });
  // Nothing was appended after the deletion.
  expect(stored()).toBe(before);
  expect((await api.state(ref)).body?.code).toBe('HISTORY_INTEGRITY_FAILED');
});
