import type { ProjectedEvent } from '@recovery-ledger/projections';
import { trustMetricsProjection, trustReport, type TrustMetricsDoc } from '@recovery-ledger/projections';
import { foldProjection } from '../../../projections/test/support/fold-projection';
import { envelopes, expectOk, LedgerScenario } from './support/ledger-scenario';
import { redelivered } from './support/redelivery';

async function docs(given: LedgerScenario): Promise<Map<string, TrustMetricsDoc>> {
  return foldProjection(trustMetricsProjection, await given.log()).docs as Map<string, TrustMetricsDoc>;
}

describe('trust metrics projection', () => {
  it('counts an unknown outcome resolved by verification, and the time it spent in pending recovery', async () => {
    const given = new LedgerScenario();
    await given.plan('op1');
    await given.dispatch('op1', 1);
    given.clock.advance(500);
    await given.envelope('op1', 1, envelopes.unknown('op1'));
    given.clock.advance(40_000);
    expectOk(await given.verify('op1', 'found_committed', 'inv_1'));

    const doc = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;

    expect(doc).toMatchObject({
      tenant: 'acme',
      tool: 'create_invoice',
      operations_planned: 1,
      unknown_outcomes: 1,
      unknown_via_envelope: 1,
      unknown_in_flight: 0,
      verified_found_committed: 1,
      succeeded: 1,
      pending_recovery_now: 0,
    });
    // From entering verifying to the verification: 40 s, not counting the 0.5 s in flight before.
    expect(doc.pending_recovery).toMatchObject({ count: 1, sum_ms: 40_000, min_ms: 40_000, max_ms: 40_000 });
  });

  it('counts a worker that died after dispatch: verified while still dispatched, timed from the dispatch', async () => {
    const given = new LedgerScenario();
    await given.plan('op1');
    await given.dispatch('op1', 1);
    given.clock.advance(90_000);
    expectOk(await given.verify('op1', 'not_found'));

    const doc = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;

    expect(doc).toMatchObject({
      unknown_outcomes: 1,
      unknown_in_flight: 1,
      unknown_via_envelope: 0,
      verified_not_found: 1,
    });
    expect(doc.pending_recovery).toMatchObject({ count: 1, sum_ms: 90_000 });
  });

  it('tells a last attempt verified in flight from one an envelope escalates, though both end ATTEMPTS_EXHAUSTED', async () => {
    // A silent attempt may reach the provider until its dispatch timeout: with 30 s and a 30 s window,
    // not_found is conclusive 60 s after the dispatch (docs/contract.md §4.5).
    const policy = {
      max_attempts: 1,
      consistency_window_ms: 30_000,
      max_consecutive_dependency_failures: 3,
      dispatch_timeout_ms: 30_000,
    };
    const given = new LedgerScenario();
    // op1: the worker died after the only dispatch; not_found leaves no attempt, so it escalates.
    await given.plan('op1', { policy });
    await given.dispatch('op1', 1);
    given.clock.advance(60_000);
    expectOk(await given.verify('op1', 'not_found'));
    // op2: the only attempt's envelope says correct_input: the same transition, no unknown outcome.
    await given.plan('op2', { policy });
    await given.dispatch('op2', 1);
    given.clock.advance(1_000);
    await given.envelope('op2', 1, envelopes.invalidInput('op2'));

    const doc = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;

    expect(doc).toMatchObject({
      unknown_outcomes: 1,
      unknown_in_flight: 1,
      verified_not_found: 1,
      terminal_escalations: 2,
      escalations_by_reason: { ATTEMPTS_EXHAUSTED: 2 },
    });
    expect(doc.pending_recovery).toMatchObject({ count: 1, sum_ms: 60_000 });
  });

  it('counts operations in pending recovery now: 1 while verifying, 0 once verified', async () => {
    const given = new LedgerScenario();
    await given.plan('op1');
    await given.dispatch('op1', 1);
    await given.envelope('op1', 1, envelopes.unknown('op1'));
    const verifying = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;
    given.clock.advance(1_000);
    await given.verify('op1', 'found_committed');
    const verified = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;

    expect(verifying.pending_recovery_now).toBe(1);
    expect(trustReport([verifying]).pending_recovery_now).toBe(1);
    expect(verified.pending_recovery_now).toBe(0);
    expect(trustReport([verified]).pending_recovery_now).toBe(0);
  });

  it('keeps no key per operation: the document is as large with 500 operations in flight as with 1', async () => {
    const shapeWith = async (inFlight: number) => {
      const given = new LedgerScenario();
      for (let i = 0; i < inFlight; i++) {
        await given.plan(`op${i}`);
        await given.dispatch(`op${i}`, 1);
      }
      const doc = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;
      // The counts grow by digits; anything kept per operation would grow the document itself.
      return JSON.stringify(doc).replace(/\d+/g, '0');
    };

    const one = await shapeWith(1);
    expect(await shapeWith(500)).toBe(one);
    expect(one.length).toBeLessThan(800);
  });

  it('counts a transition without from_since (a log written before it) but does not time it', async () => {
    const given = new LedgerScenario();
    await given.plan('op1');
    await given.dispatch('op1', 1);
    await given.envelope('op1', 1, envelopes.unknown('op1'));
    given.clock.advance(5_000);
    expectOk(await given.verify('op1', 'found_committed'));
    await given.plan('op2', { policy: { dispatch_timeout_ms: 10_000 } });
    await given.dispatch('op2', 1);
    given.clock.advance(40_000);
    expectOk(await given.verify('op2', 'not_found'));
    const log = await given.log();
    const oldLog: ProjectedEvent[] = log.map((event) => {
      if (event.type !== 'TransitionRecorded') return event;
      const { from_since: _dropped, ...data } = event.data as Record<string, unknown>;
      return { ...event, data };
    });
    expect(oldLog.some((event) => JSON.stringify(event.data).includes('from_since'))).toBe(false);

    const now = foldProjection(trustMetricsProjection, log).docs.get('acme:create_invoice') as TrustMetricsDoc;
    const before = foldProjection(trustMetricsProjection, oldLog).docs.get('acme:create_invoice') as TrustMetricsDoc;

    expect(now.pending_recovery.count).toBe(2);
    expect(before.pending_recovery.count).toBe(0);
    expect({ ...before, pending_recovery: now.pending_recovery }).toEqual(now);
    expect(before).toMatchObject({
      unknown_outcomes: 2,
      unknown_via_envelope: 1,
      unknown_in_flight: 1,
      pending_recovery_now: 0,
    });
  });

  it('counts duplicates prevented, identical retries blocked, unverified dispatches refused and escalations by reason', async () => {
    const given = new LedgerScenario();
    // op1: succeeds, then two duplicate dispatches are answered with the original success.
    await given.plan('op1');
    await given.dispatch('op1', 1);
    await given.envelope('op1', 1, envelopes.committed('op1'));
    await given.dispatch('op1', 2);
    await given.dispatch('op1', 2);
    // op2: an identical retry after correct_input is blocked.
    await given.plan('op2');
    await given.dispatch('op2', 1, 'h1');
    await given.envelope('op2', 1, envelopes.invalidInput('op2'));
    expect(await given.dispatch('op2', 2, 'h1')).toEqual({ ok: false, code: 'UNCHANGED_RETRY' });
    // op3: dispatch while in flight is refused; the lookup is unavailable, so it escalates.
    await given.plan('op3');
    await given.dispatch('op3', 1);
    expect(await given.dispatch('op3', 2)).toEqual({ ok: false, code: 'ATTEMPT_IN_FLIGHT' });
    await given.envelope('op3', 1, envelopes.unknown('op3'));
    await given.verify('op3', 'lookup_unavailable');
    // op4: a conflict the tool says to escalate.
    await given.plan('op4');
    await given.dispatch('op4', 1);
    await given.envelope('op4', 1, envelopes.conflict('op4'));

    const doc = (await docs(given)).get('acme:create_invoice') as TrustMetricsDoc;

    expect(doc).toMatchObject({
      operations_planned: 4,
      duplicate_writes_prevented: 2,
      identical_retries_blocked: 1,
      unverified_dispatches_refused: 1,
      unknown_outcomes: 1,
      lookup_unavailable: 1,
      terminal_escalations: 2,
      succeeded: 1,
      dispatch_refusals: { DUPLICATE_PREVENTED: 2, UNCHANGED_RETRY: 1, ATTEMPT_IN_FLIGHT: 1 },
      escalations_by_reason: { LOOKUP_UNAVAILABLE: 1, INVOICE_ALREADY_PAID: 1 },
    });
  });

  it('keeps tools and tenants apart, and sums them into an overall report', async () => {
    const given = new LedgerScenario();
    for (const [ref, tool, tenant] of [
      ['a', 'create_invoice', 'acme'],
      ['b', 'send_email', 'acme'],
      ['c', 'send_email', 'globex'],
    ] as const) {
      await given.plan(ref, { tool, tenant });
      await given.dispatch(ref, 1, 'h1', tenant);
      given.clock.advance(tool === 'send_email' ? 2_000 : 1_000);
      await given.envelope(ref, 1, envelopes.unknown(ref), tenant);
    }
    await given.verify('b', 'lookup_unavailable');
    given.clock.advance(10_000);
    await given.verify('a', 'found_committed');

    const all = await docs(given);
    expect([...all.keys()].sort()).toEqual(['acme:create_invoice', 'acme:send_email', 'globex:send_email']);
    const acme = [...all.values()].filter((doc) => doc.tenant === 'acme');
    const report = trustReport(acme);
    expect(report).toMatchObject({
      operations_planned: 2,
      unknown_outcomes: 2,
      verified_found_committed: 1,
      lookup_unavailable: 1,
      resolved_by_verification: 1,
      pending_recovery_now: 0,
      terminal_escalations: 1,
    });
    expect(report.pending_recovery.count).toBe(2);
    expect(trustReport([all.get('globex:send_email') as TrustMetricsDoc]).pending_recovery_now).toBe(1);
  });

  it('changes nothing when events are delivered again', async () => {
    const given = new LedgerScenario();
    await given.plan('op1');
    await given.dispatch('op1', 1);
    await given.envelope('op1', 1, envelopes.unknown('op1'));
    given.clock.advance(1_000);
    await given.verify('op1', 'found_committed');
    await given.dispatch('op1', 2);
    const log = await given.log();

    const again = foldProjection(trustMetricsProjection, redelivered(log)).docs;

    expect(again).toEqual(foldProjection(trustMetricsProjection, log).docs);
    expect((again.get('acme:create_invoice') as TrustMetricsDoc).unknown_outcomes).toBe(1);
  });
});
