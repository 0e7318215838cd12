/**
 * A denial revokes an earlier grant of the same input, and a reopen never restores it
 * (docs/contract.md §4.4, §4.10), over HTTP against the application in this process: granted,
 * dispatched, asked again by the provider, denied, reopened by an operator. The work feed does not
 * hand the step out, and a dispatch of that input is refused until an approver grants it again.
 */
import { createHash, randomUUID } from 'node:crypto';
import { canonicalJson } from '@recovery-ledger/core';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { fact, opPath, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';

const TOOL = 'wire_money';
const INPUT = { payee: 'acct_7', amount_cents: 99_900 };
const HASH = createHash('sha256').update(canonicalJson(INPUT)).digest('hex');

describe('a denied approval after a grant of the same input', () => {
  let ledger: InProcessLedger;
  beforeAll(async () => {
    // Local mode: the one local caller has every role (runtime, approver, operator).
    ledger = await startLedgerInProcess();
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const submit = (ref: string, type: string, data: Record<string, unknown>) =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events: [fact(type, data)] });
  async function ok(ref: string, type: string, data: Record<string, unknown>): Promise<number> {
    const answer = await submit(ref, type, data);
    if (answer.status !== 200) throw new Error(`${type}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.position as number;
  }

  it('is not handed out by the work feed after a reopen, and its dispatch is refused until granted again', async () => {
    const ref = `run_revoke/${randomUUID().slice(0, 8)}`;
    await ok(ref, 'StepPlanned', {
      run_id: 'run_revoke',
      tool: TOOL,
      side_effect: 'write',
      input_hash: HASH,
      input: INPUT,
    });
    await ok(ref, 'AttemptDispatched', { attempt: 1, input_hash: HASH });
    await ok(ref, 'EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.missingApproval(ref) });
    await ok(ref, 'ApprovalRecorded', { decision: 'granted', approver: 'ops', reason: 'checked' });
    await ok(ref, 'AttemptDispatched', { attempt: 2, input_hash: HASH });
    await ok(ref, 'EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.missingApproval(ref) });
    await ok(ref, 'ApprovalRecorded', { decision: 'denied', approver: 'ops', reason: 'amount too high' });
    const reopened = await ok(ref, 'StepReopened', { attempts: 1, reason: 'the customer confirmed' });

    // The read models have applied the reopen, so the feed judges the step as it now stands.
    const evidence = await request(ledger.baseUrl, 'GET', `${opPath(ref)}/evidence?wait_for_position=${reopened}`);
    expect(evidence.status).toBe(200);
    const feed = await request(ledger.baseUrl, 'GET', `/v1/work?tool=${TOOL}&limit=10&lease_ms=1000`);
    expect(feed.status).toBe(200);
    expect(feed.body.items.map((item: { operation_ref: string }) => item.operation_ref)).not.toContain(ref);

    const dispatch = await submit(ref, 'AttemptDispatched', { attempt: 3, input_hash: HASH });
    expect({ status: dispatch.status, code: dispatch.body.code }).toEqual({ status: 409, code: 'APPROVAL_REQUIRED' });
    const state = await request(ledger.baseUrl, 'GET', opPath(ref));
    expect(state.body).toMatchObject({ status: 'awaiting_approval', approval: 'pending', approval_input_hash: HASH });

    await ok(ref, 'ApprovalRecorded', { decision: 'granted', approver: 'ops', reason: 'confirmed by phone' });
    expect((await submit(ref, 'AttemptDispatched', { attempt: 3, input_hash: HASH })).status).toBe(200);
  });
});
