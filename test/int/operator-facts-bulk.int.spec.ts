/**
 * `POST /v1/operator-facts` against the service in process (docs/contract.md §9, "Operator facts
 * over many operations"): one operator fact over many operations, each decided by the rules of the
 * single submit (§4.10) and answered in order, a refusal of one leaving the others as they went;
 * the list's bound (413 TOO_MANY_OPERATIONS); the roles of the single route (§8); Idempotency-Key
 * and event ids as on the single route.
 */
import { randomUUID } from 'node:crypto';
import { LedgerClient, isLedgerRefusal } from '@recovery-ledger/client';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { auth, idOf, keyOf, KEYS, ROLES, type Role } from '../support/operator-keys';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const CANCEL = { type: 'StepCancelled', data: { reason: 'the customer withdrew the request' } };
const ACK = { type: 'EscalationAcknowledged', data: { assignee: 'ana', note: 'looking at it' } };

describe('operator facts over many operations', () => {
  let ledger: LedgerProcess;
  const submit = (ref: string, role: Role, event: unknown) =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events: [event] }, auth(role));
  const bulk = (body: unknown, role: Role = 'operator', headers: Record<string, string> = {}) =>
    request(ledger.baseUrl, 'POST', '/v1/operator-facts', body, { ...auth(role), ...headers });
  const listOf = (refs: string[]) => refs.map((ref) => ({ operation_ref: ref, event_id: randomUUID() }));
  const eventsOf = async (ref: string) =>
    ((await request(ledger.baseUrl, 'GET', `${opPath(ref)}/events`, undefined, auth('auditor'))).body.events ??
      []) as Array<{ type: string; actor: string }>;

  /** A step in the named state, built with the runtime key (as test/int/operator-actions.int.spec.ts does). */
  async function stepIn(state: 'planned' | 'verifying' | 'escalated' | 'succeeded'): Promise<string> {
    const ref = `run_bulk/${state}_${randomUUID().slice(0, 8)}`;
    const runtime = async (type: string, data: Record<string, unknown>) =>
      expect((await submit(ref, 'runtime', fact(type, data))).status).toBe(200);
    const policy = { max_attempts: 1, consistency_window_ms: 0 };
    await runtime('StepPlanned', {
      run_id: 'run_bulk',
      tool: 'refund_payment',
      side_effect: 'write',
      input_hash: 'sha256:in-1',
      policy,
    });
    if (state === 'planned') return ref;
    await runtime('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' });
    const envelope = {
      verifying: seedEnvelopes.outcomeUnknown(ref),
      escalated: seedEnvelopes.alreadyPaid(ref),
      succeeded: seedEnvelopes.success(ref, 're_1'),
    }[state];
    await runtime('EnvelopeRecorded', { attempt: 1, envelope });
    return ref;
  }

  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test('each operation is decided on its own, by the rules of the single submit, and answered in order', async () => {
    const refs = [
      await stepIn('planned'),
      await stepIn('verifying'),
      await stepIn('succeeded'),
      `run_bulk/never_${randomUUID().slice(0, 8)}`,
      await stepIn('escalated'),
    ];
    const before = await Promise.all(refs.map(eventsOf));
    const operations = listOf(refs);
    const answer = await bulk({ fact: CANCEL, operations });
    expect(answer.status).toBe(200);
    expect({ recorded: answer.body.recorded, refused: answer.body.refused }).toEqual({ recorded: 2, refused: 3 });
    const outcomes = answer.body.results.map((result: any) => [
      result.operation_ref,
      result.event_id,
      result.outcome,
      result.answer?.state.status ?? result.problem.code,
    ]);
    expect(outcomes).toEqual([
      [refs[0], operations[0].event_id, 'recorded', 'cancelled'],
      [refs[1], operations[1].event_id, 'refused', 'OUTCOME_UNVERIFIED'],
      [refs[2], operations[2].event_id, 'refused', 'STEP_SUCCEEDED'],
      [refs[3], operations[3].event_id, 'refused', 'STEP_NOT_PLANNED'],
      [refs[4], operations[4].event_id, 'recorded', 'cancelled'],
    ]);
    // A refusal is the single route's problem, status and all.
    expect(answer.body.results[1].problem).toMatchObject({
      status: 409,
      title: expect.any(String),
      detail: expect.any(String),
    });
    const after = await Promise.all(refs.map(eventsOf));
    for (const index of [1, 2, 3]) expect(after[index].length).toBe(before[index].length);
    for (const index of [0, 4]) {
      const stored = after[index].slice(before[index].length);
      expect(stored[0].type).toBe('StepCancelled');
      for (const event of stored) expect(event.actor).toBe(idOf(keyOf('operator')));
    }
  });

  test('every operator fact takes the same shape: an acknowledgement of an escalation and of a planned step', async () => {
    const escalated = await stepIn('escalated');
    const planned = await stepIn('planned');
    const answer = await bulk({ fact: ACK, operations: listOf([escalated, planned]) });
    expect(answer.status).toBe(200);
    expect(
      answer.body.results.map((result: any) => result.answer?.state.acknowledged?.assignee ?? result.problem.code),
    ).toEqual(['ana', 'STEP_NOT_ESCALATED']);
  });

  test('more operations than the bound is 413 TOO_MANY_OPERATIONS, and nothing of it is decided', async () => {
    const first = await stepIn('planned');
    const refs = [first, ...Array.from({ length: 100 }, (_, index) => `run_bulk/over_${index}`)];
    const answer = await bulk({ fact: CANCEL, operations: listOf(refs) });
    expect({ status: answer.status, code: answer.body.code, field: answer.body.field }).toEqual({
      status: 413,
      code: 'TOO_MANY_OPERATIONS',
      field: 'operations',
    });
    expect(answer.contentType).toContain('application/problem+json');
    expect((await eventsOf(first)).map((event) => event.type)).not.toContain('StepCancelled');
    // The bound itself is allowed.
    const atBound = await bulk({ fact: CANCEL, operations: listOf(refs.slice(0, 100)) });
    expect({ status: atBound.status, recorded: atBound.body.recorded }).toEqual({ status: 200, recorded: 1 });
  });

  test.each(ROLES.filter((role) => role !== 'operator'))(
    'the %s key may not record operator facts in bulk either (403, nothing stored)',
    async (role) => {
      const ref = await stepIn('escalated');
      const before = await eventsOf(ref);
      for (const operatorFact of [CANCEL, ACK]) {
        const answer = await bulk({ fact: operatorFact, operations: listOf([ref]) }, role);
        expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
      }
      expect((await eventsOf(ref)).length).toBe(before.length);
    },
  );

  test('the same Idempotency-Key and body answer the first answer again; another body under it is 422', async () => {
    const refs = [await stepIn('planned'), await stepIn('verifying')];
    const body = { fact: CANCEL, operations: listOf(refs) };
    const key = { 'idempotency-key': `"${randomUUID()}"` };
    const first = await bulk(body, 'operator', key);
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const counts = await Promise.all(refs.map(async (ref) => (await eventsOf(ref)).length));
    const again = await bulk(body, 'operator', key);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await Promise.all(refs.map(async (ref) => (await eventsOf(ref)).length))).toEqual(counts);
    const other = await bulk({ ...body, operations: listOf(refs) }, 'operator', key);
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 422, code: 'IDEMPOTENCY_KEY_REUSED' });
  });

  test('without a key, the same event ids answer a recorded operation as the first time (duplicate), never twice', async () => {
    const ref = await stepIn('planned');
    const body = { fact: CANCEL, operations: listOf([ref]) };
    const first = await bulk(body);
    const again = await bulk(body);
    expect(again.body.results[0]).toMatchObject({ outcome: 'recorded', answer: { state: { status: 'cancelled' } } });
    expect(again.body.results[0].answer.results).toEqual([
      { event_id: body.operations[0].event_id, status: 'duplicate' },
    ]);
    expect(again.body.results[0].answer.revision).toBe(first.body.results[0].answer.revision);
  });

  test('the TypeScript client records a fact on many operations in one call, each event id fixed before it is sent', async () => {
    const client = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: keyOf('operator') });
    const [escalated, verifying] = [await stepIn('escalated'), await stepIn('verifying')];
    const eventId = randomUUID();
    const answer = await client.recordOperatorFacts([{ operationRef: escalated, eventId }, verifying], {
      type: 'StepReopened',
      data: { attempts: 2, reason: 'the provider fixed the account' },
    });
    expect(answer.results.map((result) => [result.operation_ref, result.outcome])).toEqual([
      [escalated, 'recorded'],
      [verifying, 'refused'],
    ]);
    const [reopened, refused] = answer.results;
    expect(reopened.event_id).toBe(eventId);
    expect(reopened.outcome === 'recorded' && reopened.answer.state.status).toBe('retry_ready');
    expect(refused.outcome === 'refused' && refused.problem.code).toBe('STEP_NOT_ESCALATED');
    const tooMany = await client
      .recordOperatorFacts(
        Array.from({ length: 101 }, (_, index) => `run_bulk/many_${index}`),
        { type: 'StepCancelled', data: { reason: 'x' } },
      )
      .catch((error: unknown) => error);
    expect(tooMany).toMatchObject({ code: 'TOO_MANY_OPERATIONS', status: 413 });
    expect(isLedgerRefusal(tooMany)).toBe(false);
  });

  test.each<[string, (refs: string[]) => unknown, string]>([
    [
      'a fact that is not an operator fact',
      (refs) => ({ fact: { type: 'AttemptDispatched', data: {} }, operations: listOf(refs) }),
      'fact.type',
    ],
    [
      'the fact data broken',
      (refs) => ({ fact: { type: 'StepCancelled', data: {} }, operations: listOf(refs) }),
      'fact.data.reason',
    ],
    ['an empty list', () => ({ fact: CANCEL, operations: [] }), 'operations'],
    [
      'an operation named twice',
      (refs) => ({ fact: CANCEL, operations: listOf([refs[0], refs[0]]) }),
      'operations[1].operation_ref',
    ],
    [
      'an event id used twice',
      (refs) => {
        const [one, two] = listOf([refs[0], `${refs[0]}_b`]);
        return { fact: CANCEL, operations: [one, { ...two, event_id: one.event_id.toUpperCase() }] };
      },
      'operations[1].event_id',
    ],
    [
      'a ref outside the grammar',
      (refs) => ({ fact: CANCEL, operations: listOf([refs[0], 'run\u202e/x']) }),
      'operations[1].operation_ref',
    ],
    [
      'an event id that is no UUID',
      (refs) => ({ fact: CANCEL, operations: [{ operation_ref: refs[0], event_id: 'x' }] }),
      'operations[0].event_id',
    ],
  ])('%s is a 400 naming the field, and nothing is decided', async (_, make, field) => {
    const ref = await stepIn('planned');
    const answer = await bulk(make([ref]));
    expect({ status: answer.status, code: answer.body.code, field: answer.body.field }).toEqual({
      status: 400,
      code: 'BAD_REQUEST',
      field,
    });
    expect((await eventsOf(ref)).map((event) => event.type)).not.toContain('StepCancelled');
  });
});
