/**
 * The work feed on EventStoreDB (the protocol double): two service instances on one server, a
 * worker on each, the provider as a real process with its idempotency off. Leases are lease
 * streams on the same server, so the instances share them: every step is executed once.
 */
import { randomUUID } from 'node:crypto';
import { LedgerClient } from '@recovery-ledger/client';
import { VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { eventStoreDbStore } from '../support/store-setup';
import {
  CREATE_INVOICE,
  INVOICE,
  runWorker,
  startProviderProcess,
  waitForStatus,
  type ProviderProcess,
} from '../support/work-feed-harness';

jest.setTimeout(120_000);

const store = eventStoreDbStore();
let a: LedgerProcess;
let b: LedgerProcess;
let provider: ProviderProcess;

beforeAll(async () => {
  await store.start();
  provider = await startProviderProcess(['--no-idempotency']);
  const env = { ...store.env(), LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' };
  a = await startLedger({ env });
  b = await startLedger({ env });
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), provider?.stop()]);
  a?.cleanup();
  b?.cleanup();
  await store.stop();
});

it('two workers on two instances sharing one EventStoreDB execute each step once', async () => {
  const clientA = new LedgerClient({ baseUrl: a.baseUrl });
  const clientB = new LedgerClient({ baseUrl: b.baseUrl });
  const refs = Array.from({ length: 20 }, (_, index) => `run_esdb_feed/${index}-${randomUUID().slice(0, 8)}`);
  const workers = [
    runWorker(clientA, provider.url, { id: 'esdb-a', concurrency: 6 }),
    runWorker(clientB, provider.url, { id: 'esdb-b', concurrency: 6 }),
  ];
  try {
    await Promise.all(
      refs.map((operationRef, index) =>
        (index % 2 === 0 ? clientA : clientB).startStep({
          operationRef,
          runId: 'run_esdb_feed',
          tool: CREATE_INVOICE,
          input: INVOICE,
          policy: { verification_tool: VERIFICATION_TOOL },
        }),
      ),
    );
    for (const operationRef of refs) await waitForStatus(clientA, operationRef, ['succeeded'], 60_000);
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
  }
  const stats = await provider.stats();
  for (const operationRef of refs) {
    expect(stats.create_requests[operationRef]).toBe(1);
    const { events } = await clientB.getEvents(operationRef);
    const dispatches = events.filter((event) => event.type === 'AttemptDispatched');
    expect(dispatches).toHaveLength(1);
    expect((dispatches[0] as any).data).toMatchObject({ attempt: 1 });
  }
  const handled = workers.map((worker) => worker.events.filter((event) => event.type === 'item').length);
  expect(handled[0] + handled[1]).toBe(20);
});
