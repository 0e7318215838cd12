/**
 * Approvals come from approvers (docs/contract.md §4, §8): the approval matrix — runtime, auditor,
 * admin and approver keys × their own tenant and the other one — on a step that waits for an
 * approval, on the whole service in the test's process. What the start-up log says of approvals is
 * src/main.ts's, so the self-approval setting and local mode are test/e2e/security.e2e.spec.ts's.
 */
import Database from 'better-sqlite3';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { executeWrite, LedgerClient } from '@recovery-ledger/client';
import { canonicalJson } from '@recovery-ledger/core';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { fact, opPath, request } from '../support/http';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { approval, auth, awaitingApproval, KEYS, keyOf, missingApproval, type Role } from '../support/approval-matrix';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const idOf = (key: string) => `key_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;

function rows(ledger: LedgerProcess, stream: string): Array<{ type: string; data: string; metadata: string }> {
  const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare('SELECT type, data, metadata FROM events WHERE stream = ? ORDER BY revision')
      .all(stream) as Array<{
      type: string;
      data: string;
      metadata: string;
    }>;
  } finally {
    db.close();
  }
}

describe('the approval matrix (approver keys only)', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '1000000', LOG_LEVEL: 'info' },
    });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const CELLS: Array<[Role, 'own' | 'other', number, string | undefined]> = [
    ['runtime', 'own', 403, 'FORBIDDEN'],
    ['auditor', 'own', 403, 'FORBIDDEN'],
    ['admin', 'own', 403, 'FORBIDDEN'],
    ['approver', 'own', 200, undefined],
    ['runtime', 'other', 403, 'FORBIDDEN'],
    ['auditor', 'other', 403, 'FORBIDDEN'],
    ['admin', 'other', 403, 'FORBIDDEN'],
    // The other tenant's approver acts in its own namespace, where acme's step does not exist.
    ['approver', 'other', 409, 'STEP_NOT_PLANNED'],
  ];

  test.each(CELLS)('%s key of the %s tenant records an approval: %i %s', async (role, side, status, code) => {
    const ref = `run_pay/${role}_${side}_${randomUUID().slice(0, 8)}`;
    await awaitingApproval(ledger, ref, keyOf('acme', 'runtime'));
    const before = rows(ledger, `op-acme:${ref}`).length;
    const key = keyOf(side === 'own' ? 'acme' : 'globex', role);
    const answer = await request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events: [approval()] }, auth(key));
    expect({ status: answer.status, code: answer.body?.code }).toEqual({ status, code });
    const after = rows(ledger, `op-acme:${ref}`);
    if (status === 200) {
      const recorded = after.find((row) => row.type === 'ApprovalRecorded');
      // The approver's key id is the actor: the evidence says who approved, not which runtime asked.
      expect(JSON.parse(recorded?.metadata ?? '{}').actor).toBe(idOf(key));
      expect(answer.body.state.status).toBe('retry_ready');
      // The gate opens for the runtime's next attempt.
      const next = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events: [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' })] },
        auth(keyOf('acme', 'runtime')),
      );
      expect(next.status).toBe(200);
    } else {
      expect(after.length).toBe(before);
      expect(rows(ledger, `op-globex:${ref}`)).toEqual([]);
      // The runtime still cannot dispatch: the gate holds.
      const next = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events: [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' })] },
        auth(keyOf('acme', 'runtime')),
      );
      expect(next.body.code).toBe('APPROVAL_REQUIRED');
    }
  });

  test('a denial is an approver decision too', async () => {
    const ref = `run_pay/deny_${randomUUID().slice(0, 8)}`;
    await awaitingApproval(ledger, ref, keyOf('acme', 'runtime'));
    const runtime = await request(
      ledger.baseUrl,
      'POST',
      `${opPath(ref)}/events`,
      { events: [approval('denied')] },
      auth(keyOf('acme', 'runtime')),
    );
    expect(runtime.status).toBe(403);
    const approver = await request(
      ledger.baseUrl,
      'POST',
      `${opPath(ref)}/events`,
      { events: [approval('denied')] },
      auth(keyOf('acme', 'approver')),
    );
    expect(approver.status).toBe(200);
    expect(approver.body.state.status).toBe('escalated');
  });

  test('an approval inside a runtime batch refuses the whole batch, naming the fact; nothing is stored', async () => {
    const ref = `run_pay/batch_${randomUUID().slice(0, 8)}`;
    const submit = (events: unknown[], key: string) =>
      request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events }, auth(key));
    expect(
      (
        await submit(
          [
            fact('StepPlanned', {
              run_id: 'run_pay',
              tool: 'wire_money',
              side_effect: 'write',
              input_hash: 'sha256:in-1',
            }),
            fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }),
          ],
          keyOf('acme', 'runtime'),
        )
      ).status,
    ).toBe(200);
    const answer = await submit(
      [fact('EnvelopeRecorded', { attempt: 1, envelope: missingApproval(ref) }), approval()],
      keyOf('acme', 'runtime'),
    );
    expect({ status: answer.status, code: answer.body.code, field: answer.body.field }).toEqual({
      status: 403,
      code: 'FORBIDDEN',
      field: 'events[1].type',
    });
    expect(rows(ledger, `op-acme:${ref}`).map((row) => row.type)).not.toContain('EnvelopeRecorded');
  });

  test('an approver records approvals and nothing else', async () => {
    const ref = `run_pay/approver_plans_${randomUUID().slice(0, 8)}`;
    const plan = fact('StepPlanned', {
      run_id: 'run_pay',
      tool: 'wire_money',
      side_effect: 'write',
      input_hash: 'sha256:in-1',
    });
    const answer = await request(
      ledger.baseUrl,
      'POST',
      `${opPath(ref)}/events`,
      { events: [plan] },
      auth(keyOf('acme', 'approver')),
    );
    expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
    // It reads its tenant, so a console can show what waits for it.
    expect(
      (await request(ledger.baseUrl, 'GET', '/v1/recovery', undefined, auth(keyOf('acme', 'approver')))).status,
    ).toBe(200);
  });

  // What the approver reads is the input the approval binds (docs/contract.md §4.4), not the plan's.
  const hashOf = (input: unknown) => createHash('sha256').update(canonicalJson(input)).digest('hex');
  const approvalView = async (ref: string) =>
    (await request(ledger.baseUrl, 'GET', opPath(ref), undefined, auth(keyOf('acme', 'approver')))).body as {
      status: string;
      approval_input_hash?: string;
      approval_input?: unknown;
    };

  test('after a corrected input, the approval view shows that input, labelled with the hash it binds', async () => {
    const ref = `run_pay/corrected_${randomUUID().slice(0, 8)}`;
    const planned = { payee: 'acct_7', amount_cents: 100 };
    const corrected = { payee: 'acct_7', amount_cents: 99_900 };
    const submit = async (event: unknown) => {
      const answer = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events: [event] },
        auth(keyOf('acme', 'runtime')),
      );
      expect({ status: answer.status, body: answer.status === 200 ? undefined : answer.body }).toEqual({
        status: 200,
        body: undefined,
      });
    };
    await submit(
      fact('StepPlanned', {
        run_id: 'run_pay',
        tool: 'wire_money',
        side_effect: 'write',
        input_hash: hashOf(planned),
        input: planned,
      }),
    );
    await submit(fact('AttemptDispatched', { attempt: 1, input_hash: hashOf(planned) }));
    await submit(fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.invalidRecipient(ref, 2) }));
    await submit(fact('AttemptDispatched', { attempt: 2, input_hash: hashOf(corrected), input: corrected }));
    await submit(fact('EnvelopeRecorded', { attempt: 2, envelope: missingApproval(ref) }));
    expect(await approvalView(ref)).toMatchObject({
      status: 'awaiting_approval',
      approval_input_hash: hashOf(corrected),
      approval_input: { input_hash: hashOf(corrected), recorded: true, input: corrected },
    });
  });

  test('an approval for an input never recorded says so, with its hash', async () => {
    const ref = `run_pay/unrecorded_${randomUUID().slice(0, 8)}`;
    await awaitingApproval(ledger, ref, keyOf('acme', 'runtime'));
    expect((await approvalView(ref)).approval_input).toEqual({ input_hash: 'sha256:in-1', recorded: false });
  });

  test('executeWrite records the input it plans with: the approver sees it, not only its hash', async () => {
    const ref = `run_pay/sdk_${randomUUID().slice(0, 8)}`;
    const input = { payee: 'acct_9', amount_cents: 99_900 };
    const client = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: keyOf('acme', 'runtime'), maxRetries: 0 });
    const outcome = await executeWrite(
      client,
      { operationRef: ref, runId: 'run_pay', tool: 'wire_money', input },
      async () => missingApproval(ref),
    );
    expect(outcome.status).toBe('awaiting_approval');
    expect((await approvalView(ref)).approval_input).toEqual({ input_hash: hashOf(input), recorded: true, input });
    // A corrected input travels with its dispatch: the approval it needs shows it, not the plan's.
    const correctedRef = `run_pay/sdk_corrected_${randomUUID().slice(0, 8)}`;
    const step = { operationRef: correctedRef, runId: 'run_pay', tool: 'wire_money' };
    const first = await executeWrite(client, { ...step, input: { payee: 'acct_9', amount_cents: 100 } }, async () =>
      seedEnvelopes.invalidRecipient(correctedRef, 2),
    );
    expect(first.status).toBe('needs_input');
    const corrected = await executeWrite(client, { ...step, input }, async () => missingApproval(correctedRef));
    expect(corrected.status).toBe('awaiting_approval');
    expect((await approvalView(correctedRef)).approval_input).toEqual({
      input_hash: hashOf(input),
      recorded: true,
      input,
    });
  });

  test('an input that looks like it holds a secret is never stored: a dispatch with it is refused, executeWrite sends the hash alone', async () => {
    const [, secret, fragment] = SECRET_CORPUS.find(([what]) => what === 'stripe live key') ?? [];
    const [, detected, detectedFragment] = SECRET_CORPUS.find(([what]) => what === 'npm token') ?? [];
    const ref = `run_pay/secret_${randomUUID().slice(0, 8)}`;
    await awaitingApproval(ledger, ref, keyOf('acme', 'runtime'));
    for (const memo of [secret, detected]) {
      const input = { payee: 'acct_9', memo };
      const refused = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events: [fact('AttemptDispatched', { attempt: 2, input_hash: hashOf(input), input })] },
        auth(keyOf('acme', 'runtime')),
      );
      expect({ status: refused.status, field: refused.body.field }).toEqual({
        status: 400,
        field: 'events[0].data.input',
      });
    }
    const sdkRef = `run_pay/sdk_secret_${randomUUID().slice(0, 8)}`;
    const input = { payee: 'acct_9', memo: detected };
    const client = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: keyOf('acme', 'runtime'), maxRetries: 0 });
    const outcome = await executeWrite(
      client,
      { operationRef: sdkRef, runId: 'run_pay', tool: 'wire_money', input },
      async () => missingApproval(sdkRef),
    );
    expect(outcome.status).toBe('awaiting_approval');
    expect((await approvalView(sdkRef)).approval_input).toEqual({ input_hash: hashOf(input), recorded: false });
    const stored = JSON.stringify(rows(ledger, `op-acme:${sdkRef}`)) + JSON.stringify(rows(ledger, `op-acme:${ref}`));
    for (const leaked of [fragment, detectedFragment]) expect(stored).not.toContain(leaked);
  });
});
