import { runSummaryProjection, type RunSummaryDoc } from '@recovery-ledger/projections';
import { foldProjection } from '../../../projections/test/support/fold-projection';
import { envelopes, LedgerScenario } from './support/ledger-scenario';
import { redelivered } from './support/redelivery';

describe('run summary projection', () => {
  async function twoRuns() {
    const given = new LedgerScenario();
    await given.plan('run_81/step_1', { run_id: 'run_81', tool: 'create_invoice' });
    await given.plan('run_81/step_2', { run_id: 'run_81', tool: 'send_email' });
    await given.plan('run_82/step_1', { run_id: 'run_82', tool: 'create_invoice' });
    given.clock.advance(1_000);
    await given.dispatch('run_81/step_1', 1);
    await given.envelope('run_81/step_1', 1, envelopes.committed('run_81/step_1'));
    await given.dispatch('run_81/step_2', 1);
    await given.envelope('run_81/step_2', 1, envelopes.unknown('run_81/step_2'));
    return given;
  }

  it('lists the steps of a run and where each stands, with counts by status', async () => {
    const given = await twoRuns();

    const { docs, links } = foldProjection(runSummaryProjection, await given.log());
    const run = docs.get('acme:run_81') as RunSummaryDoc;

    expect(
      Object.values(run.steps).map((step) => [step.operation_ref, step.tool, step.status, step.attempts_used]),
    ).toEqual([
      ['run_81/step_1', 'create_invoice', 'succeeded', 1],
      ['run_81/step_2', 'send_email', 'verifying', 1],
    ]);
    expect(run).toMatchObject({
      run_id: 'run_81',
      total: 2,
      open: 1,
      counts: { succeeded: 1, verifying: 1 },
      started_at: '2026-03-01T09:00:00.000Z',
    });
    expect(run.steps['run_81/step_2']).toMatchObject({ reason: 'OUTCOME_UNKNOWN', since: '2026-03-01T09:00:01.000Z' });
    expect((docs.get('acme:run_82') as RunSummaryDoc).counts).toEqual({ planned: 1 });
    // Later events carry no run id: each operation's stream is linked to its run at StepPlanned.
    expect(links.get('op-acme:run_81/step_2')).toBe('acme:run_81');
  });

  it('keeps a run of one tenant apart from a run of the same id in another', async () => {
    const given = new LedgerScenario();
    await given.plan('a', { run_id: 'run_1' });
    await given.plan('b', { run_id: 'run_1', tenant: 'globex' });

    const { docs } = foldProjection(runSummaryProjection, await given.log());

    expect(Object.keys((docs.get('acme:run_1') as RunSummaryDoc).steps)).toEqual(['a']);
    expect(Object.keys((docs.get('globex:run_1') as RunSummaryDoc).steps)).toEqual(['b']);
  });

  it('changes nothing when events are delivered again', async () => {
    const log = await (await twoRuns()).log();

    expect(foldProjection(runSummaryProjection, redelivered(log)).docs).toEqual(
      foldProjection(runSummaryProjection, log).docs,
    );
  });
});
