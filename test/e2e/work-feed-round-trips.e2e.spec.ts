/**
 * The round trips a step costs through the work feed, on the built service over real HTTP: the
 * fact that ends a step under its lease gives the lease back in the same request (docs/contract.md
 * §9, "A lease ends with its step"), so the SDK's LedgerWorker sends no release for it; a fact that
 * leaves work to do under the lease (an outcome to verify) keeps it held.
 */
import { randomUUID } from 'node:crypto';
import { LedgerClient } from '@recovery-ledger/client';
import { VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { committed, unknownOutcome } from '../support/cli-harness';
import { submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  CREATE_INVOICE,
  INVOICE,
  runWorker,
  startProviderProcess,
  waitForStatus,
  type ProviderProcess,
} from '../support/work-feed-harness';

jest.setTimeout(60_000);

let ledger: LedgerProcess;
let provider: ProviderProcess;
let client: LedgerClient;
const ref = (label: string) => `run_trips/${label}-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  provider = await startProviderProcess([]);
  ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } });
  client = new LedgerClient({ baseUrl: ledger.baseUrl });
});
afterAll(async () => {
  await Promise.all([ledger?.stop(), provider?.stop()]);
  ledger?.cleanup();
});

const plan = (operationRef: string) =>
  client.startStep({
    operationRef,
    runId: 'run_trips',
    tool: CREATE_INVOICE,
    input: INVOICE,
    policy: { verification_tool: VERIFICATION_TOOL, consistency_window_ms: 0 },
  });

/** Takes `operationRef` from the feed as `worker`; answers its lease id and the attempt to dispatch. */
async function take(
  operationRef: string,
  worker: string,
): Promise<{ lease: string; attempt: number; inputHash: string }> {
  const answer = await client.work({ worker, tools: [CREATE_INVOICE], limit: 100, waitMs: 5_000 });
  const item = answer.items.find((candidate) => candidate.operation_ref === operationRef);
  if (!item) throw new Error(`${operationRef} was not handed to ${worker}: ${JSON.stringify(answer.items)}`);
  return { lease: item.lease.id, attempt: item.attempt, inputHash: item.input_hash };
}

describe('a lease ends with its step', () => {
  it('the envelope that ends the step under its lease answers lease_released, and the step is held by no one', async () => {
    const operationRef = ref('ended');
    const { position } = await plan(operationRef);
    await client.listRecovery({ waitForPosition: position });
    const { lease, attempt, inputHash } = await take(operationRef, 'w-ends');
    const underLease = { 'ledger-lease': lease };
    const dispatched = await submitFact(
      ledger.baseUrl,
      operationRef,
      'AttemptDispatched',
      { attempt, input_hash: inputHash },
      underLease,
    );
    expect(dispatched.status).toBe(200);
    // A fact that does not end the step leaves the lease where it is.
    expect(dispatched.body.lease_released).toBeUndefined();
    expect((await client.getLease(operationRef)).held).toBe(true);

    const ended = await submitFact(
      ledger.baseUrl,
      operationRef,
      'EnvelopeRecorded',
      { attempt, envelope: committed(operationRef, 'inv_trips') },
      underLease,
    );
    expect(ended.status).toBe(200);
    expect(ended.body.state.status).toBe('succeeded');
    expect(ended.body.lease_released).toBe(true);
    expect(await client.getLease(operationRef)).toEqual({ held: false });
    // The worker's own release, had it sent one, finds nothing left to give back.
    expect(await client.releaseLease(operationRef, lease)).toEqual({ released: false });
  });

  it('an outcome left to verify keeps the lease with the worker that must verify it', async () => {
    const operationRef = ref('unknown');
    const { position } = await plan(operationRef);
    await client.listRecovery({ waitForPosition: position });
    const { lease, attempt, inputHash } = await take(operationRef, 'w-verifies');
    const underLease = { 'ledger-lease': lease };
    expect(
      (
        await submitFact(
          ledger.baseUrl,
          operationRef,
          'AttemptDispatched',
          { attempt, input_hash: inputHash },
          underLease,
        )
      ).status,
    ).toBe(200);
    const unknown = await submitFact(
      ledger.baseUrl,
      operationRef,
      'EnvelopeRecorded',
      { attempt, envelope: unknownOutcome(operationRef) },
      underLease,
    );
    expect(unknown.status).toBe(200);
    expect(unknown.body.state.status).toBe('verifying');
    expect(unknown.body.lease_released).toBeUndefined();
    expect(await client.getLease(operationRef)).toMatchObject({ held: true, holder: 'w-verifies' });
  });

  it('a fact that ends the step under a lease the sender does not hold releases nothing', async () => {
    const operationRef = ref('stale');
    const { position } = await plan(operationRef);
    await client.listRecovery({ waitForPosition: position });
    const { lease, attempt, inputHash } = await take(operationRef, 'w-first');
    expect(await client.releaseLease(operationRef, lease)).toEqual({ released: true });
    const { lease: second } = await take(operationRef, 'w-second');
    // The first worker's lease is over; its facts are still judged by the gate, but they give back
    // nothing: the second worker's lease stays.
    const stale = { 'ledger-lease': lease };
    expect(
      (await submitFact(ledger.baseUrl, operationRef, 'AttemptDispatched', { attempt, input_hash: inputHash }, stale))
        .status,
    ).toBe(200);
    const ended = await submitFact(
      ledger.baseUrl,
      operationRef,
      'EnvelopeRecorded',
      { attempt, envelope: committed(operationRef, 'inv_stale') },
      stale,
    );
    expect(ended.status).toBe(200);
    expect(ended.body.lease_released).toBeUndefined();
    expect(await client.getLease(operationRef)).toMatchObject({ held: true, holder: 'w-second' });
    expect(await client.releaseLease(operationRef, second)).toEqual({ released: true });
  });
});

describe('LedgerWorker', () => {
  it('sends no release for steps their envelopes ended: two submits and its polls per step, nothing else', async () => {
    const sent: string[] = [];
    const counting = new LedgerClient({
      baseUrl: ledger.baseUrl,
      fetch: (input, init) => {
        const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
        sent.push(`${init?.method ?? 'GET'} ${url.pathname}`);
        return fetch(input, init);
      },
    });
    const refs = [ref('w1'), ref('w2'), ref('w3')];
    const worker = runWorker(counting, provider.url, { id: 'w-counted', concurrency: 1 });
    try {
      for (const operationRef of refs) {
        await plan(operationRef);
        await waitForStatus(client, operationRef, ['succeeded']);
      }
    } finally {
      await worker.stop();
    }
    const about = (operationRef: string) => sent.filter((line) => line.includes(encodeURIComponent(operationRef)));
    for (const operationRef of refs) {
      // AttemptDispatched, then EnvelopeRecorded: the envelope's answer gave the lease back.
      expect(about(operationRef)).toEqual([
        `POST /v1/operations/${encodeURIComponent(operationRef)}/events`,
        `POST /v1/operations/${encodeURIComponent(operationRef)}/events`,
      ]);
      expect(await client.getLease(operationRef)).toEqual({ held: false });
    }
    expect(sent.filter((line) => !line.startsWith('GET /v1/work') && !line.includes('/events'))).toEqual([]);
  });
});
