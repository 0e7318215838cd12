/**
 * When an attempt may still reach the provider, late envelopes, and approvals bound to an input
 * (docs/contract.md §4.4, §4.5, §4.9; docs/reliability.md "When an attempt may still reach the
 * provider"), over real HTTP against the built service.
 */
import { createHash, randomUUID } from 'node:crypto';
import { runCli } from '../support/cli-harness';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const RUNTIME_KEY = 'reach-runtime-key-000000001';
const APPROVER_KEY = 'reach-approver-key-00000001';
const METRICS_KEY = 'reach-metrics-key-000000001';
const RUN = `run_${randomUUID().slice(0, 6)}`;
const hash = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex');
const H1 = hash({ customer: 'cus_1', amount_cents: 1000 });
const H2 = hash({ customer: 'cus_2', amount_cents: 100_000_000 });

let ledger: LedgerProcess;
let runtime: ReturnType<typeof ledgerAt>;
let approver: ReturnType<typeof ledgerAt>;

beforeAll(async () => {
  ledger = await startLedger({
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${APPROVER_KEY}:approver:acme,${METRICS_KEY}:metrics:*` },
  });
  runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  approver = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${APPROVER_KEY}` });
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

const plan = (
  ref: string,
  inputHash = H1,
  policy: Record<string, number> = { consistency_window_ms: 1_000, dispatch_timeout_ms: 1_000 },
) =>
  runtime.submit(ref, [
    fact('StepPlanned', { run_id: RUN, tool: 'create_invoice', side_effect: 'write', input_hash: inputHash, policy }),
  ]);
const dispatch = (ref: string, attempt: number, inputHash = H1, extra: Record<string, unknown> = {}) =>
  runtime.submit(ref, [fact('AttemptDispatched', { attempt, input_hash: inputHash, ...extra })]);
const notFound = (ref: string) =>
  runtime.submit(ref, [fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() })]);

describe('a not_found is conclusive only a consistency window after the attempt can no longer reach the provider', () => {
  it('answers the call deadline with the grant, and refuses a not_found until the deadline plus the window', async () => {
    const ref = `${RUN}/silent_1`;
    await plan(ref);
    const granted = await dispatch(ref, 1, H1, { call_window_ms: 500 });
    expect(granted.status).toBe(200);
    const { since, call_deadline } = granted.body.state as { since: string; call_deadline: string };
    expect(Date.parse(call_deadline) - Date.parse(since)).toBe(500);

    // The old rule measured the window from the dispatch: 1,000 ms. Now it runs from the deadline.
    const early = await notFound(ref);
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({
      code: 'VERIFICATION_PREMATURE',
      directive: { next_action: 'verify_operation' },
    });
    expect(early.body.directive.not_before).toBe(new Date(Date.parse(call_deadline) + 1_000).toISOString());
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    await until(
      () => notFound(ref),
      (answer) => answer.status === 200,
      'a conclusive not_found',
    );
    expect((await runtime.state(ref)).body).toMatchObject({ status: 'retry_ready' });
  });

  it('a forged call_deadline in the dispatch is refused at the edge', async () => {
    const ref = `${RUN}/forged_1`;
    await plan(ref);
    const forged = await dispatch(ref, 1, H1, { call_deadline: new Date(0).toISOString() });
    expect(forged.status).toBe(400);
    expect(forged.body).toMatchObject({ code: 'BAD_REQUEST' });
    expect((await runtime.state(ref)).body.status).toBe('planned');
  });
});

describe('a late envelope is evidence', () => {
  it('records a paused dispatcher’s late success as a possible duplicate, in the state, the evidence, triage and /metrics', async () => {
    const ref = `${RUN}/paused_1`;
    await plan(ref);
    await dispatch(ref, 1, H1, { call_window_ms: 200 });
    await until(
      () => notFound(ref),
      (answer) => answer.status === 200,
      'a conclusive not_found',
    );
    expect((await dispatch(ref, 2)).status).toBe(200);

    // Attempt 1's dispatcher wakes up and reports what it did.
    const lateId = randomUUID();
    const lateFact = fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(ref, 'inv_late') }, lateId);
    const late = await runtime.submit(ref, [lateFact]);
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({
      code: 'ATTEMPT_MISMATCH',
      state: { status: 'dispatched', current_attempt: 2, possible_duplicate: { attempt: 1 } },
    });

    const events = (await runtime.events(ref)).body.events as Array<{
      type: string;
      event_id: string;
      data: Record<string, unknown>;
    }>;
    const recorded = events.filter((event) => event.type === 'LateOutcomeRecorded');
    expect(recorded).toEqual([
      expect.objectContaining({
        event_id: lateId,
        data: expect.objectContaining({ attempt: 1, possible_duplicate: true }),
      }),
    ]);

    // Sent again under its id: answered as the first time, nothing appended.
    const again = await runtime.submit(ref, [lateFact]);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('ATTEMPT_MISMATCH');
    expect((await runtime.events(ref)).body.events).toHaveLength(events.length);

    const position = Math.max(
      ...(await runtime.events(ref)).body.events.map((event: { position: number }) => event.position),
    );
    const get = (path: string) =>
      request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${RUNTIME_KEY}` });
    const evidence = await get(`/v1/operations/${encodeURIComponent(ref)}/evidence?wait_for_position=${position}`);
    expect(evidence.body.possible_duplicate).toMatchObject({ attempt: 1, event_id: lateId });
    // The CLI folds the same trail from the data directory and answers it in the same words.
    const local = runCli(['evidence', ref, '--data-dir', ledger.dataDir, '--tenant', 'acme', '--json']);
    expect(local.status).toBe(0);
    const { as_of_position: _asOf, ...served } = evidence.body;
    expect(JSON.parse(local.stdout)).toEqual(served);
    expect(evidence.body.entries.map((entry: { summary: string }) => entry.summary)).toContain(
      'late envelope of attempt 1: committed after a later attempt was granted: attempts 1 and 2 may each have reached the provider: possible duplicate write',
    );
    const triage = await get(`/v1/triage?kind=possible_duplicate&wait_for_position=${position}`);
    expect(triage.body.items).toEqual([
      expect.objectContaining({ kind: 'possible_duplicate', operation_ref: ref, status: 'dispatched' }),
    ]);
    const listed = await get(`/v1/operations?has=possible_duplicates&wait_for_position=${position}`);
    expect(listed.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([ref]);
    const trust = await get(`/v1/metrics/trust?wait_for_position=${position}`);
    expect(trust.body.overall.possible_duplicates).toBe(1);
    const metrics = await request(ledger.baseUrl, 'GET', '/metrics', undefined, {
      authorization: `Bearer ${METRICS_KEY}`,
    });
    expect(String(metrics.body)).toMatch(
      /^ledger_trust_possible_duplicates_total\{tenant="acme",tool="create_invoice"\} 1$/m,
    );
  });

  it('records a late unknown outcome after a later attempt was granted as a possible duplicate, in the evidence, triage and the trust metrics', async () => {
    const ref = `${RUN}/paused_unknown_1`;
    await plan(ref);
    await dispatch(ref, 1, H1, { call_window_ms: 200 });
    await until(
      () => notFound(ref),
      (answer) => answer.status === 200,
      'a conclusive not_found',
    );
    expect((await dispatch(ref, 2)).status).toBe(200);
    const created = await runtime.submit(ref, [
      fact('EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.success(ref, 'inv_2') }),
    ]);
    expect(created.body.state.status).toBe('succeeded');

    // Attempt 1's dispatcher wakes and its call is cut off after it may have left: unknown.
    const lateId = randomUUID();
    const late = await runtime.submit(ref, [
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }, lateId),
    ]);
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({
      code: 'ATTEMPT_MISMATCH',
      state: { status: 'succeeded', possible_duplicate: { attempt: 1 } },
    });
    const events = (await runtime.events(ref)).body.events as Array<{ type: string; data: Record<string, unknown> }>;
    expect(events.filter((event) => event.type === 'LateOutcomeRecorded')).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ attempt: 1, possible_duplicate: true }) }),
    ]);

    const position = Math.max(
      ...(await runtime.events(ref)).body.events.map((event: { position: number }) => event.position),
    );
    const get = (path: string) =>
      request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${RUNTIME_KEY}` });
    const evidence = await get(`/v1/operations/${encodeURIComponent(ref)}/evidence?wait_for_position=${position}`);
    expect(evidence.body.possible_duplicate).toMatchObject({ attempt: 1, event_id: lateId });
    expect(evidence.body.entries.map((entry: { summary: string }) => entry.summary)).toContain(
      'late envelope of attempt 1: OUTCOME_UNKNOWN, unknown after a later attempt was granted: attempts 1 and 2 may each have reached the provider: possible duplicate write',
    );
    const triage = await get(`/v1/triage?kind=possible_duplicate&wait_for_position=${position}`);
    expect(triage.body.items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'possible_duplicate', operation_ref: ref, status: 'succeeded' }),
      ]),
    );
    const trust = await get(`/v1/metrics/trust?wait_for_position=${position}`);
    // The late success of paused_1 above, and this one.
    expect(trust.body.overall.possible_duplicates).toBe(2);
  });

  it('a late unknown outcome of the attempt verified not_found, before another was granted, sends the step back to verifying', async () => {
    const ref = `${RUN}/reopened_1`;
    await plan(ref);
    await dispatch(ref, 1, H1, { call_window_ms: 200 });
    await until(
      () => notFound(ref),
      (answer) => answer.status === 200,
      'a conclusive not_found',
    );
    const lateFact = fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) });
    const late = await runtime.submit(ref, [lateFact]);
    expect(late.status).toBe(200);
    // Sent again under its id: answered as the first time.
    const again = await runtime.submit(ref, [lateFact]);
    expect(again.status).toBe(200);
    expect(again.body.state).toMatchObject({ status: 'verifying', reason: 'LATE_OUTCOME_UNKNOWN' });
    expect(late.body).toMatchObject({
      state: { status: 'verifying', reason: 'LATE_OUTCOME_UNKNOWN' },
      directive: { next_action: 'verify_operation' },
    });
    const retry = await dispatch(ref, 2);
    expect(retry.status).toBe(409);
    expect(retry.body.code).toBe('VERIFY_BEFORE_RETRY');
    // The lookup counts again only a consistency window after the late report.
    const early = await notFound(ref);
    expect(early.body.code).toBe('VERIFICATION_PREMATURE');
  });

  it('a late success of the last attempt granted settles the step: the next dispatch replays it', async () => {
    const ref = `${RUN}/settle_1`;
    await plan(ref);
    await dispatch(ref, 1, H1, { call_window_ms: 200 });
    await until(
      () => notFound(ref),
      (answer) => answer.status === 200,
      'a conclusive not_found',
    );
    const late = await runtime.submit(ref, [
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(ref, 'inv_9') }),
    ]);
    expect(late.status).toBe(200);
    expect(late.body.state).toMatchObject({ status: 'succeeded', reason: 'LATE_SUCCESS' });
    const replay = await dispatch(ref, 2);
    expect(replay.body).toMatchObject({ replayed: true, state: { status: 'succeeded' } });
  });
});

describe('an approval binds to the input it was asked for', () => {
  it('after a granted approval, another input is refused and waits for its own approval', async () => {
    const ref = `${RUN}/refund_1`;
    await plan(ref);
    await dispatch(ref, 1);
    const asked = await runtime.submit(ref, [
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.missingApproval(ref) }),
    ]);
    expect(asked.body.state).toMatchObject({ status: 'awaiting_approval', approval_input_hash: H1 });

    const granted = await approver.submit(ref, [
      fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example' }),
    ]);
    expect(granted.status).toBe(200);
    const stored = (await runtime.events(ref)).body.events.find(
      (event: { type: string }) => event.type === 'ApprovalRecorded',
    );
    expect(stored.data).toMatchObject({ decision: 'granted', input_hash: H1 });

    const other = await dispatch(ref, 2, H2);
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({
      code: 'APPROVAL_REQUIRED',
      state: { status: 'awaiting_approval', approval_input_hash: H2 },
    });
    // An approver who names the first input for this request is refused: it asks for H2.
    const stale = await approver.submit(ref, [
      fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example', input_hash: H1 }),
    ]);
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('FACT_NOT_EXPECTED');
    const second = await approver.submit(ref, [
      fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example', input_hash: H2 }),
    ]);
    expect(second.status).toBe(200);
    expect((await dispatch(ref, 2, H2)).body.state).toMatchObject({ status: 'dispatched', current_attempt: 2 });
  });
});
