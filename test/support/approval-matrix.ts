/**
 * The approval matrix's keys and the step it reads (docs/security.md, "Approvals"): every role in
 * two tenants, and an operation of acme's waiting for an approval. Shared by the in-process matrix
 * and the e2e cases that read the service's own start-up log.
 */
import { createHash } from 'node:crypto';
import { fact, opPath, request } from './http';

export type Role = 'runtime' | 'auditor' | 'admin' | 'approver';
export const ROLES: readonly Role[] = ['runtime', 'auditor', 'admin', 'approver'];
export const keyOf = (tenant: string, role: Role) =>
  `${tenant}-${role}-${createHash('sha256').update(`${tenant}/${role}`).digest('hex').slice(0, 20)}`;
export const KEYS = ['acme', 'globex']
  .flatMap((tenant) => ROLES.map((role) => `${keyOf(tenant, role)}:${role}:${tenant}`))
  .join(',');
export const auth = (key: string) => ({ authorization: `Bearer ${key}` });

export const missingApproval = (ref: string) => ({
  ok: false,
  code: 'MISSING_APPROVAL',
  category: 'authorization',
  commit_state: 'not_committed',
  retry: { directive: 'never', max_attempts_remaining: 1 },
  next_action: 'request_approval',
  operation_ref: ref,
  safe_details: {},
  agent_message: 'This transfer needs an approval first.',
  user_message: 'Waiting for an approver.',
});
export const approval = (decision = 'granted') =>
  fact('ApprovalRecorded', { decision, approver: 'treasury on call', reason: 'checked the amount' });

/** Plans, dispatches and records the tool's MISSING_APPROVAL, as acme's runtime: the step waits for an approval. */
export async function awaitingApproval(ledger: { baseUrl: string }, ref: string, runtimeKey: string): Promise<void> {
  const submit = (event: unknown) =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events: [event] }, auth(runtimeKey));
  expect(
    (
      await submit(
        fact('StepPlanned', { run_id: 'run_pay', tool: 'wire_money', side_effect: 'write', input_hash: 'sha256:in-1' }),
      )
    ).status,
  ).toBe(200);
  expect((await submit(fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }))).status).toBe(200);
  const answer = await submit(fact('EnvelopeRecorded', { attempt: 1, envelope: missingApproval(ref) }));
  expect(answer.body.state.status).toBe('awaiting_approval');
}
