/**
 * Two service instances on one EventStoreDB (the protocol double), each with its own data
 * directory and so its own read models (`read-models.sqlite`, a cache of the log): both serve
 * correct reads of what either wrote, and racing dispatches spread across them are decided at the
 * revision they read, so exactly one of 20 is granted (docs/contract.md §4, §6; issue 4).
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { verifyChain } from '../../src/store/hash-chain';
import { operationStream } from '../../src/store/stream-names';
import type { StoredEvent } from '../../src/store/event-store.port';
import { ledgerAt, opPath, request, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { envelopes, ok, operation, problem, refusal, type Ledger } from '../support/scenario';
import { eventStoreDbStore } from '../support/store-setup';

const TENANT = 'default'; // local mode
const store = eventStoreDbStore();
let a: LedgerProcess;
let b: LedgerProcess;
let apiA: Ledger;
let apiB: Ledger;

beforeAll(async () => {
  await store.start();
  [a, b] = await Promise.all([startLedger({ env: store.env() }), startLedger({ env: store.env() })]);
  apiA = ledgerAt(a.baseUrl);
  apiB = ledgerAt(b.baseUrl);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  a?.cleanup();
  b?.cleanup();
  await store.stop();
});

/** A GET on both instances, asked to wait until `position` is projected; answers both bodies. */
async function onBoth(path: string, position: number): Promise<[any, any]> {
  const separator = path.includes('?') ? '&' : '?';
  const answers = await Promise.all(
    [a, b].map((ledger) =>
      request(ledger.baseUrl, 'GET', `${path}${separator}wait_timeout_ms=20000&wait_for_position=${position}`),
    ),
  );
  return [ok(answers[0]), ok(answers[1])];
}

/** The stream as the log holds it, read through the port (not through either service). */
async function streamOf(ref: string): Promise<StoredEvent[]> {
  return store.store.readStream(operationStream(TENANT, ref));
}

function expectWhole(events: StoredEvent[]): void {
  expect(events.map((event) => event.revision)).toEqual(events.map((_, index) => index));
  expect(verifyChain(events)).toBeUndefined();
}

const uniqueRun = () => `run_${randomUUID().slice(0, 8)}`;
const uniqueTool = () => `tool_${randomUUID().slice(0, 8)}`;

describe('two service instances on one EventStoreDB', () => {
  test('each keeps its own read models and no events file: the log is the server', () => {
    for (const ledger of [a, b]) {
      expect(existsSync(join(ledger.dataDir, 'read-models.sqlite'))).toBe(true);
      expect(existsSync(join(ledger.dataDir, 'events.sqlite'))).toBe(false);
    }
    expect(a.dataDir).not.toBe(b.dataDir);
  });

  test('20 dispatches racing across both: exactly one 200, nineteen typed ATTEMPT_IN_FLIGHT, one AttemptDispatched', async () => {
    const tool = uniqueTool();
    const ref = `${uniqueRun()}/charge`;
    ok(await operation(apiA, ref).plan({ tool }));
    const ops = [operation(apiA, ref), operation(apiB, ref)];
    const answers = await Promise.all(Array.from({ length: 20 }, (_, index) => ops[index % 2].dispatch(1)));

    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
    const refused = answers.filter((answer) => answer.status !== 200);
    expect(refused).toHaveLength(19);
    for (const answer of refused) refusal(answer, 'ATTEMPT_IN_FLIGHT');

    const log = await streamOf(ref);
    expectWhole(log);
    expect(log.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
    expect(log.filter((event) => event.type === 'DispatchRefused').map((event) => event.data.code)).toEqual(
      Array(19).fill('ATTEMPT_IN_FLIGHT'),
    );
    // Both instances read the stream from the server, strongly consistent, the same as the log.
    for (const op of ops) {
      expect((await op.events()).map((event) => event.event_id)).toEqual(log.map((event) => event.event_id));
      expect(ok(await op.state())).toMatchObject({
        status: 'dispatched',
        current_attempt: 1,
        revision: log.length - 1,
      });
    }

    // And each instance's own projections saw all of it, whichever instance wrote it.
    const last = log[log.length - 1].position;
    const [evidenceA, evidenceB] = await onBoth(`${opPath(ref)}/evidence`, last);
    expect(evidenceA).toEqual(evidenceB);
    expect(evidenceA.entries.map((entry: { kind: string }) => entry.kind)).toEqual([
      'plan',
      'transition',
      'attempt',
      'transition',
      ...Array(19).fill('refusal'),
    ]);
    expect(evidenceA.entries.map((entry: { event_id: string }) => entry.event_id)).toEqual(
      log.map((event) => event.event_id),
    );
    const [trustA, trustB] = await onBoth(`/v1/metrics/trust?tool=${tool}`, last);
    expect(trustA).toEqual(trustB);
    expect(trustA.tools).toEqual([
      expect.objectContaining({
        tool,
        operations_planned: 1,
        unverified_dispatches_refused: 19,
        dispatch_refusals: { ATTEMPT_IN_FLIGHT: 19 },
      }),
    ]);
  });

  test('20 dispatches at one expected_revision across both: one 200, nineteen REVISION_CONFLICT, nothing else stored', async () => {
    const ref = `${uniqueRun()}/charge`;
    const planned = ok(await operation(apiB, ref).plan());
    const ops = [operation(apiA, ref), operation(apiB, ref)];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, index) => ops[index % 2].dispatch(1, undefined, randomUUID(), planned.revision)),
    );
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
    for (const answer of answers.filter((other) => other.status !== 200)) problem(answer, 409, 'REVISION_CONFLICT');
    const log = await streamOf(ref);
    expectWhole(log);
    expect(log.map((event) => event.type)).toEqual([
      'StepPlanned',
      'TransitionRecorded',
      'AttemptDispatched',
      'TransitionRecorded',
    ]);
  });

  test('a run driven through both instances, fact by fact alternately, reads the same and right on each', async () => {
    const run = uniqueRun();
    const tool = uniqueTool();
    const apis = [apiA, apiB];
    let turn = 0;
    const next = () => apis[turn++ % 2];
    const refs = [`${run}/step_1`, `${run}/step_2`, `${run}/step_3`];
    let last: number;
    const step = async (ref: string, act: (op: ReturnType<typeof operation>) => Promise<HttpAnswer>) => {
      last = ok(await act(operation(next(), ref))).position;
    };
    for (const ref of refs) await step(ref, (op) => op.plan({ tool, policy: { consistency_window_ms: 0 } }));
    // step_1 succeeds; step_2's outcome is unknown and is verified committed; step_3 stays in flight.
    await step(refs[0], (op) => op.dispatch(1));
    await step(refs[0], (op) => op.record(1, envelopes.success(refs[0])));
    await step(refs[1], (op) => op.dispatch(1));
    await step(refs[1], (op) => op.record(1, envelopes.outcomeUnknown(refs[1])));
    await step(refs[2], (op) => op.dispatch(1));
    // A dispatch on the succeeded step, on the other instance: the original success replayed.
    const replay = ok(await operation(next(), refs[0]).dispatch(2));
    expect(replay).toMatchObject({ replayed: true, success: { attempt: 1, proven_by: 'envelope' } });
    last = replay.position;

    const [runA, runB] = await onBoth(`/v1/runs/${run}`, last);
    expect(runA).toEqual(runB);
    expect(runA).toMatchObject({
      run_id: run,
      total: 3,
      open: 2,
      counts: { succeeded: 1, verifying: 1, dispatched: 1 },
    });
    expect(
      runA.steps.map((entry: { operation_ref: string; status: string }) => [entry.operation_ref, entry.status]),
    ).toEqual([
      [refs[0], 'succeeded'],
      [refs[1], 'verifying'],
      [refs[2], 'dispatched'],
    ]);

    const [recoveryA, recoveryB] = await onBoth(`/v1/recovery?tool=${tool}`, last);
    expect(recoveryA).toEqual(recoveryB);
    expect(
      recoveryA.items.map((item: { operation_ref: string; status: string }) => [item.operation_ref, item.status]),
    ).toEqual([
      [refs[1], 'verifying'],
      [refs[2], 'dispatched'],
    ]);

    for (const ref of refs) {
      const [evidenceA, evidenceB] = await onBoth(`${opPath(ref)}/evidence`, last);
      expect(evidenceA).toEqual(evidenceB);
      expect(evidenceA.entries.map((entry: { event_id: string }) => entry.event_id)).toEqual(
        (await streamOf(ref)).map((event) => event.event_id),
      );
    }

    // The verification lands through the instance that did not record the unknown outcome.
    const verified = ok(await operation(apiA, refs[1]).verify('found_committed', { evidence_ref: 'inv_2' }));
    expect(verified.state).toMatchObject({ status: 'succeeded', reason: 'VERIFIED_COMMITTED' });
    const [trustA, trustB] = await onBoth(`/v1/metrics/trust?tool=${tool}`, verified.position);
    expect(trustA).toEqual(trustB);
    expect(trustA.tools).toEqual([
      expect.objectContaining({
        tool,
        operations_planned: 3,
        succeeded: 2,
        unknown_outcomes: 1,
        verified_found_committed: 1,
        duplicate_writes_prevented: 1,
        pending_recovery_now: 0,
      }),
    ]);
    const [afterA, afterB] = await onBoth(`/v1/recovery?tool=${tool}`, verified.position);
    expect(afterA.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([refs[2]]);
    expect(afterB.items).toEqual(afterA.items);
  });
});
