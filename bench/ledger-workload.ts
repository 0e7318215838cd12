import { randomUUID } from 'node:crypto';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, LedgerProblem, type SubmittedEvent } from '@recovery-ledger/core';
import { systemClock, type Clock } from '../src/shared/clock';
import { LedgerService } from '../src/ledger/ledger.service';
import type { EventStore } from '../src/store/event-store.port';

/**
 * A synthetic but realistic workload for the benchmarks: operations live through the contract's
 * paths (committed, unknown then verified, corrected input, rate limit, approval, escalation),
 * decided by the real LedgerService, so the log holds what production would write.
 */
type Fact = { type: SubmittedEvent['type']; data: (ref: string, now: string) => Record<string, unknown> };

const TOOLS = ['create_invoice', 'send_email', 'create_ticket', 'deploy_service', 'update_record', 'charge_card'];

const envelope = {
  committed: (ref: string, now: string) => ({
    ok: true,
    operation_ref: ref,
    commit_state: 'committed',
    result: { id: `res_${ref}` },
    verification: { checked_at: now, evidence_ref: `ev_${ref}` },
  }),
  unknown: (ref: string) => ({
    ok: false,
    code: 'OUTCOME_UNKNOWN',
    category: 'dependency',
    commit_state: 'unknown',
    retry: { directive: 'never', max_attempts_remaining: 0 },
    next_action: 'verify_operation',
    operation_ref: ref,
    safe_details: { verification_tool: 'lookup_by_operation_ref' },
    agent_message: 'The write may have completed. Verify operation_ref before any new write.',
    user_message: 'The request is being checked before anything is sent again.',
  }),
  invalid: (ref: string) => ({
    ok: false,
    code: 'INVALID_RECIPIENT_ADDRESS',
    category: 'validation',
    commit_state: 'not_committed',
    retry: { directive: 'after_input_fix', max_attempts_remaining: 1 },
    next_action: 'correct_input',
    operation_ref: ref,
    safe_details: { field: 'recipient_email' },
    agent_message: 'recipient_email is invalid; request a corrected address.',
    user_message: 'I need a valid recipient address before I can send this.',
  }),
  // not_before is the decision instant: the retry may run at once, the path is still recorded.
  rateLimited: (ref: string, now: string) => ({
    ok: false,
    code: 'RATE_LIMITED',
    category: 'dependency',
    commit_state: 'not_committed',
    retry: { directive: 'after_delay', not_before: now, max_attempts_remaining: 2 },
    next_action: 'wait_and_retry',
    operation_ref: ref,
    safe_details: { retry_after: 0 },
    agent_message: 'Rate limited.',
    user_message: 'Waiting before trying again.',
  }),
  approval: (ref: string) => ({
    ok: false,
    code: 'MISSING_APPROVAL',
    category: 'authorization',
    commit_state: 'not_committed',
    retry: { directive: 'never', max_attempts_remaining: 1 },
    next_action: 'request_approval',
    operation_ref: ref,
    safe_details: {},
    agent_message: 'Needs approval.',
    user_message: 'Waiting for approval.',
  }),
};

const plan = (n: number): Fact => ({
  type: 'StepPlanned',
  // A zero consistency window lets not_found be accepted at once, whatever the wall clock does.
  data: () => ({
    run_id: `run_${Math.floor(n / 8)}`,
    tool: TOOLS[n % TOOLS.length],
    side_effect: 'write',
    input_hash: 'h1',
    policy: { consistency_window_ms: 0 },
  }),
});
const dispatch = (attempt: number, hash = 'h1'): Fact => ({
  type: 'AttemptDispatched',
  data: () => ({ attempt, input_hash: hash }),
});
const record = (attempt: number, make: (ref: string, now: string) => Record<string, unknown>): Fact => ({
  type: 'EnvelopeRecorded',
  data: (ref, now) => ({ attempt, envelope: make(ref, now) }),
});
const verify = (outcome: string): Fact => ({
  type: 'VerificationRecorded',
  data: (ref, now) => ({
    outcome,
    checked_at: now,
    ...(outcome === 'found_committed' ? { evidence_ref: `ev_${ref}` } : {}),
  }),
});
const approve: Fact = { type: 'ApprovalRecorded', data: () => ({ decision: 'granted', approver: 'ops-lead' }) };

/** The facts a runtime submits for operation n, one submit each. */
export function lifecycle(n: number): Fact[] {
  const path = n % 20;
  const start = [plan(n), dispatch(1)];
  if (path < 8) return [...start, record(1, envelope.committed)];
  if (path < 12) return [...start, record(1, envelope.unknown), dispatch(2), verify('found_committed'), dispatch(2)];
  if (path < 14)
    return [...start, record(1, envelope.unknown), verify('not_found'), dispatch(2), record(2, envelope.committed)];
  if (path < 16)
    return [...start, record(1, envelope.invalid), dispatch(2, 'h1'), dispatch(2, 'h2'), record(2, envelope.committed)];
  if (path < 18) return [...start, record(1, envelope.rateLimited), dispatch(2), record(2, envelope.committed)];
  if (path < 19) return [...start, record(1, envelope.approval), approve, dispatch(2), record(2, envelope.committed)];
  return [...start, record(1, envelope.unknown), verify('lookup_unavailable')];
}

export function ledgerOver(store: EventStore, clock: Clock = systemClock): LedgerService {
  return new LedgerService(store, clock, {
    envelopeLimits: DEFAULT_ENVELOPE_LIMITS,
    defaultPolicy: DEFAULT_POLICY,
    maxConflictRetries: 5,
  });
}

export interface SubmitTiming {
  position: number;
  answeredAt: number;
}

/**
 * Runs operation n's lifecycle; refusals are part of the paths (an identical retry, a dispatch
 * while verifying) and are recorded by the ledger. Calls `onAnswer` after each submit that stored.
 */
export async function runOperation(
  ledger: LedgerService,
  n: number,
  tenant: string,
  onAnswer?: (position: number) => void,
): Promise<void> {
  const ref = `run_${Math.floor(n / 8)}/step_${n}`;
  for (const fact of lifecycle(n)) {
    const now = new Date().toISOString();
    try {
      const answer = await ledger.submit(
        { tenant, actor: 'key_bench', operationRef: ref },
        { events: [{ event_id: randomUUID(), type: fact.type, data: fact.data(ref, now) as SubmittedEvent['data'] }] },
      );
      onAnswer?.(answer.position);
    } catch (error) {
      if (!(error instanceof LedgerProblem)) throw error;
    }
  }
}

export function percentileOf(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
