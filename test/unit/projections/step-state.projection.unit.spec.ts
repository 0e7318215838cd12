import { stepStateProjection, type StepStateDoc } from '@recovery-ledger/projections';
import { trustMetricsProjection, trustReport, type TrustMetricsDoc } from '@recovery-ledger/projections';
import { docOf, foldProjection } from '../../../projections/test/support/fold-projection';
import { envelopes, expectOk, LedgerScenario } from './support/ledger-scenario';
import { redelivered } from './support/redelivery';

const REF = 'run_81/step_4';
const KEY = `acme:${REF}`;

describe('step state projection', () => {
  it('indexes a planned step with its tool, run, policy and directive', async () => {
    const given = new LedgerScenario();
    expectOk(
      await given.plan(REF, {
        tool: 'create_invoice',
        policy: { verification_tool: 'get_invoice_by_operation_ref', max_attempts: 4 },
      }),
    );

    const doc = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);

    expect(doc).toMatchObject({
      tenant: 'acme',
      operation_ref: REF,
      status: 'planned',
      run_id: 'run_81',
      tool: 'create_invoice',
      side_effect: 'write',
      verification_tool: 'get_invoice_by_operation_ref',
      attempts_used: 0,
      current_attempt: 0,
      attempts_remaining: 4,
      next_action: 'dispatch',
      since: '2026-03-01T09:00:00.000Z',
      revision: 1,
    });
    expect(stepStateProjection.index?.(doc)).toEqual({
      tenant: 'acme',
      operation_ref: REF,
      status: 'planned',
      tool: 'create_invoice',
      run_id: 'run_81',
      since_ms: Date.parse('2026-03-01T09:00:00.000Z'),
      unknown_outcomes: 0,
      resolved_by_lookup: 0,
      duplicates_prevented: 0,
      identical_retries_blocked: 0,
      unverified_dispatches_refused: 0,
      possible_duplicates: 0,
      // Due on the work feed at once, to dispatch (src/domain/work-due.ts).
      due_ms: Date.parse('2026-03-01T09:00:00.000Z'),
      revision: 1,
    });
    expect(doc.dispatch_timeout_ms).toBe(60_000);
  });

  it('indexes when the work feed may hand a step out: a dispatch after its timeout, never a finished step', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    given.clock.advance(1_000);
    await given.dispatch(REF, 1);
    const dispatched = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);
    expect(stepStateProjection.index?.(dispatched).due_ms).toBe(Date.parse('2026-03-01T09:00:01.000Z') + 60_000);
    await given.envelope(REF, 1, envelopes.committed(REF));
    const succeeded = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);
    expect(succeeded.status).toBe('succeeded');
    expect(stepStateProjection.index?.(succeeded).due_ms).toBeNull();
  });

  it('follows transitions: since is when the current status began, attempts count granted dispatches only', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    given.clock.advance(1_000);
    await given.dispatch(REF, 1);
    given.clock.advance(2_000);
    await given.envelope(REF, 1, envelopes.unknown(REF));
    given.clock.advance(5_000);
    // Refused (VERIFY_BEFORE_RETRY) and recorded as DispatchRefused: no attempt was granted.
    expect(await given.dispatch(REF, 2)).toEqual({ ok: false, code: 'VERIFY_BEFORE_RETRY' });

    const doc = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);

    expect(doc).toMatchObject({
      status: 'verifying',
      reason: 'OUTCOME_UNKNOWN',
      since: '2026-03-01T09:00:03.000Z',
      attempts_used: 1,
      current_attempt: 1,
      next_action: 'verify_operation',
      updated_at: '2026-03-01T09:00:08.000Z',
    });
  });

  it('keeps not_before while a retry is scheduled and drops it once the next attempt runs', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.rateLimited(REF, '2026-03-01T09:01:00.000Z'));
    const scheduled = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);
    expect(scheduled).toMatchObject({
      status: 'retry_scheduled',
      not_before: '2026-03-01T09:01:00.000Z',
      next_action: 'wait_and_retry',
    });

    given.clock.advance(60_000);
    expectOk(await given.dispatch(REF, 2));
    const dispatched = docOf<StepStateDoc>(stepStateProjection, await given.log(), KEY);
    expect(dispatched.status).toBe('dispatched');
    expect(dispatched.current_attempt).toBe(2);
    expect(dispatched).not.toHaveProperty('not_before');
  });

  it('keeps operations of different tenants apart, even under the same operation_ref', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { tool: 'create_invoice' });
    await given.plan(REF, { tool: 'send_email', tenant: 'globex' });

    const { docs } = foldProjection(stepStateProjection, await given.log());

    expect((docs.get(KEY) as StepStateDoc).tool).toBe('create_invoice');
    expect((docs.get(`globex:${REF}`) as StepStateDoc).tool).toBe('send_email');
  });

  it('changes nothing when events are delivered again', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.committed(REF, 'inv_1'));
    await given.dispatch(REF, 2);
    const log = await given.log();

    const once = foldProjection(stepStateProjection, log).docs;
    const again = foldProjection(stepStateProjection, redelivered(log)).docs;

    expect(again).toEqual(once);
    expect((once.get(KEY) as StepStateDoc).status).toBe('succeeded');
  });

  it('skips event types it does not know and data it cannot read, without throwing', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    const log = await given.log();
    const last = log[log.length - 1];
    const strange = [
      {
        ...last,
        position: last.position + 1,
        revision: last.revision + 1,
        event_id: 'x1',
        type: 'SomethingNew',
        data: { anything: 1 },
      },
      {
        ...last,
        position: last.position + 2,
        revision: last.revision + 2,
        event_id: 'x2',
        type: 'TransitionRecorded',
        data: null as never,
      },
    ];

    const doc = docOf<StepStateDoc>(stepStateProjection, [...log, ...strange], KEY);

    expect(doc.status).toBe('planned');
    expect(doc.position).toBe(last.position + 2);
  });
});

describe('step state: what each operation added to the trust metrics', () => {
  it('counts per operation what the trust metrics count per tool, so each figure can list its operations', async () => {
    const given = new LedgerScenario();
    const incident = 'run_9/incident';
    await given.plan(incident);
    await given.dispatch(incident, 1);
    await given.envelope(incident, 1, envelopes.unknown(incident));
    await given.dispatch(incident, 2); // refused: VERIFY_BEFORE_RETRY
    await given.verify(incident, 'found_committed', 'inv_1');
    await given.dispatch(incident, 2); // answered with the success: DUPLICATE_PREVENTED
    const fix = 'run_9/fix';
    await given.plan(fix);
    await given.dispatch(fix, 1);
    await given.envelope(fix, 1, envelopes.invalidInput(fix));
    await given.dispatch(fix, 2); // same input hash: UNCHANGED_RETRY
    const crashed = 'run_9/crashed';
    await given.plan(crashed);
    await given.dispatch(crashed, 1);
    await given.verify(crashed, 'found_committed', 'inv_2'); // no envelope ever came back

    const log = await given.log();
    const counters = (ref: string) => {
      const doc = docOf<StepStateDoc>(stepStateProjection, log, `acme:${ref}`);
      return [
        doc.unknown_outcomes,
        doc.resolved_by_lookup,
        doc.duplicates_prevented,
        doc.identical_retries_blocked,
        doc.unverified_dispatches_refused,
      ];
    };
    expect(counters(incident)).toEqual([1, 1, 1, 0, 1]);
    expect(counters(fix)).toEqual([0, 0, 0, 1, 0]);
    expect(counters(crashed)).toEqual([1, 1, 0, 0, 0]);
    // The same events, counted by the trust metrics for the tenant.
    const trust = trustReport([...foldProjection(trustMetricsProjection, log).docs.values()] as TrustMetricsDoc[]);
    expect([
      trust.unknown_outcomes,
      trust.resolved_by_verification,
      trust.duplicate_writes_prevented,
      trust.identical_retries_blocked,
      trust.unverified_dispatches_refused,
    ]).toEqual([2, 2, 1, 1, 1]);
  });
});
