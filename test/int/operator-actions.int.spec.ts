/**
 * Operator facts over real HTTP against the built service (docs/contract.md §4.10, §8): every
 * action in every state it meets, allowed (the step moves, the fact is stored with the operator's
 * key id as actor) or refused (409 with a code naming the state, nothing stored); which roles may
 * record them; and what the evidence trail, the triage queue, the trust metrics and the work feed
 * make of them.
 */
import { randomUUID } from 'node:crypto';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { auth, idOf, keyOf, KEYS, ROLES, type Role } from '../support/operator-keys';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const TOOL = 'refund_payment';
const unknownOutcome = (ref: string) => seedEnvelopes.outcomeUnknown(ref);
const invalidInput = (ref: string) => seedEnvelopes.invalidRecipient(ref, 1);
const escalate = (ref: string) => seedEnvelopes.alreadyPaid(ref);
const success = (ref: string) => seedEnvelopes.success(ref, 're_1');

const manualFound = () =>
  fact('OutcomeVerifiedManually', {
    outcome: 'found_committed',
    evidence_ref: 'inv_9',
    note: 'checked the provider: invoice inv_9 exists',
  });
const manualNotFound = () =>
  fact('OutcomeVerifiedManually', { outcome: 'not_found', note: 'no refund in the provider dashboard' });
const cancel = () => fact('StepCancelled', { reason: 'the customer withdrew the request' });
const reopen = () => fact('StepReopened', { attempts: 2, reason: 'the provider fixed the account' });
const ack = () => fact('EscalationAcknowledged', { assignee: 'ana', note: 'looking at it' });

describe('operator facts over HTTP', () => {
  let ledger: LedgerProcess;
  const submit = (ref: string, role: Role, ...events: unknown[]) =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events }, auth(role));
  const eventsOf = async (ref: string) =>
    (await request(ledger.baseUrl, 'GET', `${opPath(ref)}/events`, undefined, auth('auditor'))).body.events as Array<{
      type: string;
      actor: string;
    }>;

  /** Builds a step in the named state with the runtime key (window 0, dispatch timeout as asked). */
  async function stepIn(state: string, timeoutMs = 600_000): Promise<string> {
    const ref = `run_ops/${state}_${randomUUID().slice(0, 8)}`;
    const runtime = async (event: unknown, expected?: string) => {
      const answer = await submit(ref, 'runtime', event);
      expect(answer.status).toBe(200);
      if (expected) expect(answer.body.state.status).toBe(expected);
    };
    const policy = {
      max_attempts: state === 'escalated_known' ? 1 : 3,
      consistency_window_ms: 0,
      dispatch_timeout_ms: timeoutMs,
    };
    await runtime(
      fact('StepPlanned', { run_id: 'run_ops', tool: TOOL, side_effect: 'write', input_hash: 'sha256:in-1', policy }),
      'planned',
    );
    if (state === 'planned') return ref;
    await runtime(fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }), 'dispatched');
    if (state === 'dispatched') return ref;
    if (state === 'succeeded')
      await runtime(fact('EnvelopeRecorded', { attempt: 1, envelope: success(ref) }), 'succeeded');
    if (state === 'needs_input')
      await runtime(fact('EnvelopeRecorded', { attempt: 1, envelope: invalidInput(ref) }), 'needs_input');
    if (state === 'escalated_known')
      await runtime(fact('EnvelopeRecorded', { attempt: 1, envelope: escalate(ref) }), 'escalated');
    if (state === 'verifying' || state === 'escalated_unknown')
      await runtime(fact('EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(ref) }), 'verifying');
    if (state === 'escalated_unknown') {
      await runtime(
        fact('VerificationRecorded', { outcome: 'lookup_unavailable', checked_at: new Date().toISOString() }),
        'escalated',
      );
    }
    if (state === 'cancelled') {
      await runtime(fact('EnvelopeRecorded', { attempt: 1, envelope: invalidInput(ref) }), 'needs_input');
      expect((await submit(ref, 'operator', cancel())).status).toBe(200);
    }
    return ref;
  }

  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const ACTIONS: Record<string, () => unknown> = {
    'verified manually, found': manualFound,
    'verified manually, not found': manualNotFound,
    cancel,
    reopen,
    acknowledge: ack,
  };
  // [action, state, status it moves to ('stays' keeps it), or the refusal's code]
  const CELLS: Array<[string, string, string]> = [
    ['verified manually, found', 'verifying', 'succeeded'],
    ['verified manually, found', 'escalated_unknown', 'succeeded'],
    ['verified manually, found', 'dispatched', 'ATTEMPT_IN_FLIGHT'],
    ['verified manually, found', 'needs_input', 'OUTCOME_KNOWN'],
    ['verified manually, found', 'succeeded', 'STEP_SUCCEEDED'],
    ['verified manually, found', 'cancelled', 'STEP_CANCELLED'],
    ['verified manually, not found', 'verifying', 'retry_ready'],
    ['verified manually, not found', 'escalated_unknown', 'retry_ready'],
    ['verified manually, not found', 'planned', 'OUTCOME_KNOWN'],
    ['verified manually, not found', 'escalated_known', 'OUTCOME_KNOWN'],
    ['cancel', 'planned', 'cancelled'],
    ['cancel', 'needs_input', 'cancelled'],
    ['cancel', 'escalated_known', 'cancelled'],
    ['cancel', 'dispatched', 'OUTCOME_UNVERIFIED'],
    ['cancel', 'verifying', 'OUTCOME_UNVERIFIED'],
    ['cancel', 'escalated_unknown', 'OUTCOME_UNVERIFIED'],
    ['cancel', 'succeeded', 'STEP_SUCCEEDED'],
    ['cancel', 'cancelled', 'STEP_CANCELLED'],
    ['reopen', 'escalated_known', 'retry_ready'],
    ['reopen', 'escalated_unknown', 'OUTCOME_UNVERIFIED'],
    ['reopen', 'needs_input', 'STEP_NOT_ESCALATED'],
    ['reopen', 'verifying', 'STEP_NOT_ESCALATED'],
    ['reopen', 'succeeded', 'STEP_SUCCEEDED'],
    ['reopen', 'cancelled', 'STEP_CANCELLED'],
    ['acknowledge', 'escalated_known', 'stays'],
    ['acknowledge', 'escalated_unknown', 'stays'],
    ['acknowledge', 'planned', 'STEP_NOT_ESCALATED'],
    ['acknowledge', 'dispatched', 'STEP_NOT_ESCALATED'],
    ['acknowledge', 'succeeded', 'STEP_SUCCEEDED'],
    ['acknowledge', 'cancelled', 'STEP_CANCELLED'],
  ];

  test.each(CELLS)('%s in %s: %s', async (action, state, expected) => {
    const ref = await stepIn(state);
    const before = await eventsOf(ref);
    const statusBefore = (await request(ledger.baseUrl, 'GET', opPath(ref), undefined, auth('auditor'))).body.status;
    const answer = await submit(ref, 'operator', ACTIONS[action]());
    const after = await eventsOf(ref);
    if (/^[A-Z_]+$/.test(expected)) {
      expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 409, code: expected });
      expect(answer.contentType).toContain('application/problem+json');
      expect(after.length).toBe(before.length);
      return;
    }
    expect(answer.status).toBe(200);
    expect(answer.body.state.status).toBe(expected === 'stays' ? statusBefore : expected);
    const stored = after.slice(before.length);
    expect(stored[0].type).toBe((ACTIONS[action]() as { type: string }).type);
    // The fact, and what it caused, carry the operator's key id as actor.
    for (const event of stored) expect(event.actor).toBe(idOf(keyOf('operator')));
  });

  test('a manual verification of a dispatch past its dispatch timeout resolves it; before, it is in flight', async () => {
    const ref = await stepIn('dispatched', 1_000);
    const answer = await until(
      () => submit(ref, 'operator', manualFound()),
      (candidate) => candidate.status !== 409 || candidate.body.code !== 'ATTEMPT_IN_FLIGHT',
      'the dispatch timeout to pass',
    );
    expect(answer.status).toBe(200);
    expect(answer.body.state).toMatchObject({
      status: 'succeeded',
      success: { proven_by: 'manual_verification', evidence_ref: 'inv_9' },
    });
  });

  test('found_committed without evidence_ref is a 400 naming the field, and nothing is stored', async () => {
    const ref = await stepIn('verifying');
    const before = await eventsOf(ref);
    const answer = await submit(
      ref,
      'operator',
      fact('OutcomeVerifiedManually', { outcome: 'found_committed', note: 'trust me' }),
    );
    expect({ status: answer.status, code: answer.body.code, field: answer.body.field }).toEqual({
      status: 400,
      code: 'BAD_REQUEST',
      field: 'events[0].data.evidence_ref',
    });
    expect((await eventsOf(ref)).length).toBe(before.length);
  });

  test.each(ROLES.filter((role) => role !== 'operator'))(
    'the %s key may not record any operator fact (403, nothing stored)',
    async (role) => {
      const ref = await stepIn('escalated_known');
      const before = await eventsOf(ref);
      for (const make of Object.values(ACTIONS)) {
        const answer = await submit(ref, role, make());
        expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
      }
      expect((await eventsOf(ref)).length).toBe(before.length);
    },
  );

  test('the operator key records nothing but operator facts', async () => {
    const ref = await stepIn('needs_input');
    const dispatch = await submit(
      ref,
      'operator',
      fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-2' }),
    );
    expect({ status: dispatch.status, code: dispatch.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
    const approval = await submit(ref, 'operator', fact('ApprovalRecorded', { decision: 'granted', approver: 'ops' }));
    expect({ status: approval.status, code: approval.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
  });

  test('a cancelled step refuses the next dispatch STEP_CANCELLED, and records the refusal', async () => {
    const ref = await stepIn('cancelled');
    const answer = await submit(ref, 'runtime', fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-2' }));
    expect({ status: answer.status, code: answer.body.code, next: answer.body.directive?.next_action }).toEqual({
      status: 409,
      code: 'STEP_CANCELLED',
      next: 'none',
    });
    expect((await eventsOf(ref)).map((event) => event.type).slice(-1)).toEqual(['DispatchRefused']);
  });

  test('a reopened step is due on the work feed again; a cancelled one never is', async () => {
    const reopened = await stepIn('escalated_known');
    const cancelled = await stepIn('escalated_known');
    expect((await submit(reopened, 'operator', reopen())).status).toBe(200);
    const cancelledAnswer = await submit(cancelled, 'operator', cancel());
    expect(cancelledAnswer.status).toBe(200);
    const feed = await until(
      () => request(ledger.baseUrl, 'GET', `/v1/work?tool=${TOOL}&limit=100&lease_ms=1000`, undefined, auth('runtime')),
      (answer) =>
        answer.status === 200 &&
        answer.body.items.some((item: { operation_ref: string }) => item.operation_ref === reopened),
      'the reopened step on the work feed',
    );
    const item = feed.body.items.find((candidate: { operation_ref: string }) => candidate.operation_ref === reopened);
    expect(item).toMatchObject({ kind: 'dispatch', attempt: 2 });
    expect(feed.body.items.some((candidate: { operation_ref: string }) => candidate.operation_ref === cancelled)).toBe(
      false,
    );
    // The dispatch the reopen allows is granted.
    const dispatch = await submit(
      reopened,
      'runtime',
      fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' }),
    );
    expect(dispatch.body.state.status).toBe('dispatched');
  });

  test('the evidence trail names the person and the evidence; triage moves an acknowledged escalation to its own list', async () => {
    const verified = await stepIn('verifying');
    const position = (await submit(verified, 'operator', manualFound())).body.position;
    const trail = await request(
      ledger.baseUrl,
      'GET',
      `${opPath(verified)}/evidence?wait_for_position=${position}`,
      undefined,
      auth('auditor'),
    );
    expect(trail.body.verdict).toMatchObject({
      commit_state: 'committed',
      proven_by: 'manual_verification',
      evidence_ref: 'inv_9',
    });
    expect(trail.body.verdict.statement).toContain(idOf(keyOf('operator')));
    const entry = trail.body.entries.find(
      (candidate: { type: string }) => candidate.type === 'OutcomeVerifiedManually',
    );
    expect(entry).toMatchObject({ kind: 'verification', actor: idOf(keyOf('operator')) });
    expect(entry.summary).toContain('invoice inv_9 exists');

    const escalated = await stepIn('escalated_known');
    const acked = await submit(escalated, 'operator', ack());
    const queue = (kind?: string) =>
      request(
        ledger.baseUrl,
        'GET',
        `/v1/triage?wait_for_position=${acked.body.position}&limit=500${kind ? `&kind=${kind}` : ''}`,
        undefined,
        auth('auditor'),
      );
    const needsPerson = await queue();
    expect(needsPerson.body.items.some((item: { operation_ref: string }) => item.operation_ref === escalated)).toBe(
      false,
    );
    expect(needsPerson.body.counts.by_kind.acknowledged).toBeGreaterThanOrEqual(1);
    const acknowledged = await queue('acknowledged');
    expect(
      acknowledged.body.items.find((item: { operation_ref: string }) => item.operation_ref === escalated),
    ).toMatchObject({
      kind: 'acknowledged',
      status: 'escalated',
      acknowledged: { assignee: 'ana', by: idOf(keyOf('operator')), note: 'looking at it' },
    });
  });

  test('trust metrics count manual verifications apart from automated ones', async () => {
    const ref = await stepIn('verifying');
    const position = (await submit(ref, 'operator', manualNotFound())).body.position;
    const trust = await request(
      ledger.baseUrl,
      'GET',
      `/v1/metrics/trust?tool=${TOOL}&wait_for_position=${position}`,
      undefined,
      auth('auditor'),
    );
    expect(trust.status).toBe(200);
    const figures = trust.body.tools.find((tool: { tool: string }) => tool.tool === TOOL);
    expect(figures.manually_verified_not_found).toBeGreaterThanOrEqual(1);
    expect(figures.verified_not_found).toBe(0);
  });
});
