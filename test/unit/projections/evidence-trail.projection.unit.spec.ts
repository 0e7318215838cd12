import { evidenceTrailProjection, type EvidenceTrailDoc } from '@recovery-ledger/projections';
import { docOf, foldProjection } from '../../../projections/test/support/fold-projection';
import { envelopes, expectOk, LedgerScenario } from './support/ledger-scenario';
import { redelivered } from './support/redelivery';

const REF = 'run_81/step_4';
const KEY = `acme:${REF}`;
const LOOKUP = 'get_invoice_by_operation_ref';

async function trail(given: LedgerScenario): Promise<EvidenceTrailDoc> {
  return docOf<EvidenceTrailDoc>(evidenceTrailProjection, await given.log(), KEY);
}

describe('evidence trail projection', () => {
  it('records every event in order, with time, actor, revision and event id, and what caused the derived ones', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { policy: { verification_tool: LOOKUP } });
    given.clock.advance(1_000);
    await given.dispatch(REF, 1);
    given.clock.advance(1_000);
    await given.envelope(REF, 1, envelopes.unknown(REF));
    await given.dispatch(REF, 2);
    const log = await given.log();

    const doc = await trail(given);

    expect(doc.entries.map((entry) => [entry.revision, entry.kind, entry.type])).toEqual([
      [0, 'plan', 'StepPlanned'],
      [1, 'transition', 'TransitionRecorded'],
      [2, 'attempt', 'AttemptDispatched'],
      [3, 'transition', 'TransitionRecorded'],
      [4, 'envelope', 'EnvelopeRecorded'],
      [5, 'transition', 'TransitionRecorded'],
      [6, 'refusal', 'DispatchRefused'],
    ]);
    doc.entries.forEach((entry, index) => {
      expect(entry.event_id).toBe(log[index].event_id);
      expect(entry.position).toBe(log[index].position);
      expect(entry.recorded_at).toBe(log[index].metadata.recorded_at);
      expect(entry.actor).toBe('key_runtime1');
    });
    expect(doc.entries[3].caused_by).toBe(log[2].event_id);
    expect(doc.entries[4].data).toMatchObject({
      attempt: 1,
      envelope: { code: 'OUTCOME_UNKNOWN', commit_state: 'unknown' },
    });
    expect(doc.entries[6].summary).toBe('dispatch of attempt 2 refused: VERIFY_BEFORE_RETRY');
  });

  it('says how a verified commit was proven, and counts duplicates it prevented', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { policy: { verification_tool: LOOKUP } });
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.unknown(REF));
    expectOk(await given.verify(REF, 'found_committed', 'inv_123'));

    const verified = await trail(given);
    expect(verified.verdict).toEqual({
      status: 'succeeded',
      terminal: true,
      commit_state: 'committed',
      proven_by: 'verification',
      proof_event_id: verified.entries.find((entry) => entry.kind === 'verification')?.event_id,
      attempt: 1,
      verification_tool: LOOKUP,
      evidence_ref: 'inv_123',
      reason: 'VERIFIED_COMMITTED',
      duplicates_prevented: 0,
      statement: 'committed — verified via get_invoice_by_operation_ref, evidence inv_123',
    });

    expect(expectOk(await given.dispatch(REF, 2)).replayed).toBe(true);
    const replayed = await trail(given);
    expect(replayed.verdict.duplicates_prevented).toBe(1);
    expect(replayed.verdict.statement).toBe(
      'committed — verified via get_invoice_by_operation_ref, evidence inv_123; 1 duplicate write prevented',
    );
  });

  it("takes the verification tool from the envelope's safe_details when the policy names none", async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.unknown(REF, 'lookup_invoice'));

    const pending = await trail(given);
    expect(pending.verdict).toMatchObject({
      status: 'verifying',
      terminal: false,
      commit_state: 'unknown',
      proven_by: 'envelope',
      verification_tool: 'lookup_invoice',
    });
    expect(pending.verdict.statement).toBe(
      'pending — the outcome of attempt 1 is unknown (OUTCOME_UNKNOWN); verify via lookup_invoice before any new write',
    );
  });

  it("proves a commit by the tool's own envelope", async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.committed(REF, 'inv_9'));

    expect((await trail(given)).verdict).toMatchObject({
      commit_state: 'committed',
      proven_by: 'envelope',
      attempt: 1,
      evidence_ref: 'inv_9',
      statement: "committed — confirmed by create_invoice's envelope for attempt 1, evidence inv_9",
    });
  });

  it('after a verified not_found, the next attempt carries the verdict', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { policy: { verification_tool: LOOKUP } });
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.unknown(REF));
    given.clock.advance(31_000); // past the default 30 s consistency window
    expectOk(await given.verify(REF, 'not_found'));

    const ready = await trail(given);
    expect(ready.verdict).toMatchObject({
      status: 'retry_ready',
      commit_state: 'not_committed',
      proven_by: 'verification',
      attempt: 1,
    });
    expect(ready.verdict.statement).toBe(
      'pending — attempt 1 verified not committed via get_invoice_by_operation_ref; a new attempt with the same operation_ref may run',
    );

    await given.dispatch(REF, 2);
    await given.envelope(REF, 2, envelopes.committed(REF, 'inv_2'));
    expect((await trail(given)).verdict).toMatchObject({
      status: 'succeeded',
      proven_by: 'envelope',
      attempt: 2,
      evidence_ref: 'inv_2',
    });
  });

  it('escalates an unverifiable write without guessing', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { policy: { verification_tool: LOOKUP } });
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.unknown(REF));
    await given.verify(REF, 'lookup_unavailable');

    expect((await trail(given)).verdict).toMatchObject({
      status: 'escalated',
      terminal: true,
      commit_state: 'unknown',
      proven_by: 'verification',
      reason: 'LOOKUP_UNAVAILABLE',
      statement:
        'escalated — outcome unknown: the lookup via get_invoice_by_operation_ref was unavailable, so nothing was guessed',
    });
  });

  it('names who denied an approval', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.needsApproval(REF));
    expect((await trail(given)).verdict.statement).toBe(
      'pending — not committed; awaiting approval (MISSING_APPROVAL)',
    );
    await given.approve(REF, 'denied', 'bob');

    const doc = await trail(given);
    expect(doc.verdict).toMatchObject({
      status: 'escalated',
      commit_state: 'not_committed',
      statement: 'escalated — not committed: approval denied by bob',
    });
    expect(doc.entries.find((entry) => entry.kind === 'approval')?.summary).toBe('approval denied by bob');
  });

  it('records an identical retry blocked after correct_input, and the escalation when attempts run out', async () => {
    const given = new LedgerScenario();
    await given.plan(REF, { policy: { max_attempts: 2 } });
    await given.dispatch(REF, 1, 'h1');
    await given.envelope(REF, 1, envelopes.invalidInput(REF));
    expect(await given.dispatch(REF, 2, 'h1')).toEqual({ ok: false, code: 'UNCHANGED_RETRY' });
    const needsInput = await trail(given);
    expect(needsInput.verdict.statement).toBe(
      'pending — not committed; needs corrected input after INVALID_RECIPIENT_ADDRESS (field recipient_email)',
    );
    expect(needsInput.entries[needsInput.entries.length - 1].summary).toBe(
      'dispatch of attempt 2 refused: UNCHANGED_RETRY',
    );

    await given.dispatch(REF, 2, 'h2');
    await given.envelope(REF, 2, envelopes.invalidInput(REF));
    const doc = await trail(given);
    expect(doc.verdict).toMatchObject({
      status: 'escalated',
      reason: 'ATTEMPTS_EXHAUSTED',
      commit_state: 'not_committed',
      proven_by: 'envelope',
      statement: 'escalated — not committed: attempts exhausted (2 of 2 used)',
    });
  });

  it('changes nothing when events are delivered again', async () => {
    const given = new LedgerScenario();
    await given.plan(REF);
    await given.dispatch(REF, 1);
    await given.envelope(REF, 1, envelopes.committed(REF));
    const log = await given.log();

    expect(foldProjection(evidenceTrailProjection, redelivered(log)).docs).toEqual(
      foldProjection(evidenceTrailProjection, log).docs,
    );
    expect((await trail(given)).entries).toHaveLength(log.length);
  });
});
