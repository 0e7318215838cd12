/**
 * given(events).when(fact).then(events) / .thenRefuses(code) for the decider (STYLE §4). Events are
 * plain domain facts; ids and times are filled in so the tests read as the seed's table.
 */
import { decide, fold, type Decision, type StepState } from '../../src/domain/decider';
import { DEFAULT_POLICY, type LedgerEvent, type RecordedEvent, type StepPlannedData, type SubmittedFact } from '../../src/domain/events';
import type { ToolEnvelope } from '../../src/domain/envelope/envelope.types';

export const T0 = '2026-12-02T10:00:00.000Z';
export const at = (ms: number) => new Date(Date.parse(T0) + ms).toISOString();
export const REF = 'run_81/step_4';

let counter = 0;
export const nextId = () => `00000000-0000-4000-8000-${(++counter).toString().padStart(12, '0')}`;

export function recorded(events: LedgerEvent[], times?: string[]): RecordedEvent[] {
  return events.map((event, index) => ({ ...event, event_id: nextId(), recorded_at: times?.[index] ?? T0 }) as RecordedEvent);
}

export class Scenario {
  private history: RecordedEvent[] = [];

  constructor(initial: LedgerEvent[] = []) {
    this.history = recorded(initial);
  }

  get state(): StepState {
    return fold(this.history);
  }

  /** Decides the fact at `now` and, when accepted, records what it caused (like the service does). */
  submit(fact: SubmittedFact, now = T0): Decision {
    const decision = decide(this.state, { fact, event_id: nextId(), now });
    if (decision.kind !== 'refused' || decision.events.length > 0) {
      this.history.push(...recorded(decision.events, decision.events.map(() => now)));
    }
    return decision;
  }

  when(fact: SubmittedFact, now = T0) {
    const decision = this.submit(fact, now);
    return {
      decision,
      then: (types: string[]) => {
        expect(decision.kind).not.toBe('refused');
        expect(decision.events.map((e) => e.type)).toEqual(types);
        return decision;
      },
      thenRefuses: (code: string) => {
        if (decision.kind !== 'refused') throw new Error(`expected refusal ${code}, got ${decision.kind}`);
        expect(decision.code).toBe(code);
        return decision;
      },
      thenMovesTo: (status: string) => {
        expect(decision.kind).not.toBe('refused');
        const transition = decision.events.find((e) => e.type === 'TransitionRecorded');
        expect(transition && (transition.data as { to: string }).to).toBe(status);
        return decision;
      },
    };
  }

  get events(): RecordedEvent[] {
    return this.history;
  }
}

export const given = (events: LedgerEvent[] = []) => new Scenario(events);

// ---- facts --------------------------------------------------------------------------------------

export function planned(overrides: Omit<Partial<StepPlannedData>, 'policy'> & { policy?: Partial<StepPlannedData['policy']> } = {}): SubmittedFact {
  return {
    type: 'StepPlanned',
    data: {
      run_id: 'run_81',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:input-1',
      ...overrides,
      policy: { ...DEFAULT_POLICY, ...(overrides.policy ?? {}) },
    },
  };
}

export const dispatched = (attempt: number, input_hash = 'sha256:input-1'): SubmittedFact => ({
  type: 'AttemptDispatched',
  data: { attempt, input_hash },
});

export const envelope = (attempt: number, env: ToolEnvelope): SubmittedFact => ({
  type: 'EnvelopeRecorded',
  data: { attempt, envelope: env, redactions: [] },
});

export const verified = (outcome: 'found_committed' | 'not_found' | 'lookup_unavailable', evidence_ref?: string): SubmittedFact => ({
  type: 'VerificationRecorded',
  data: { outcome, checked_at: T0, redactions: [], ...(evidence_ref ? { evidence_ref } : {}) },
});

export const approval = (decision: 'granted' | 'denied'): SubmittedFact => ({
  type: 'ApprovalRecorded',
  data: { decision, approver: 'ops@example.com' },
});

// ---- envelopes from the seed ---------------------------------------------------------------------

export const success = (): ToolEnvelope => ({
  ok: true,
  operation_ref: REF,
  commit_state: 'committed',
  result: { invoice_id: 'inv_123' },
  verification: { checked_at: T0, evidence_ref: 'inv_123' },
});

export const invalidRecipient = (remaining = 1): ToolEnvelope => ({
  ok: false,
  code: 'INVALID_RECIPIENT_ADDRESS',
  category: 'validation',
  commit_state: 'not_committed',
  retry: { directive: 'after_input_fix', max_attempts_remaining: remaining },
  next_action: 'correct_input',
  operation_ref: REF,
  safe_details: { field: 'recipient_email' },
  agent_message: 'recipient_email is invalid; request a corrected address.',
  user_message: 'I need a valid recipient address before I can send this.',
});

export const rateLimited = (notBefore: string, remaining = 2, category: 'dependency' | 'conflict' = 'dependency'): ToolEnvelope => ({
  ok: false,
  code: 'RATE_LIMITED',
  category,
  commit_state: 'not_committed',
  retry: { directive: 'after_delay', not_before: notBefore, max_attempts_remaining: remaining },
  next_action: 'wait_and_retry',
  operation_ref: REF,
  safe_details: { retry_after: 30 },
  agent_message: 'Rate limited; retry after not_before.',
  user_message: 'Waiting a moment before trying again.',
});

export const outcomeUnknown = (): ToolEnvelope => ({
  ok: false,
  code: 'OUTCOME_UNKNOWN',
  category: 'dependency',
  commit_state: 'unknown',
  retry: { directive: 'never', max_attempts_remaining: 0 },
  next_action: 'verify_operation',
  operation_ref: REF,
  safe_details: { verification_tool: 'get_invoice_by_operation_ref' },
  agent_message: 'The write may have completed. Verify operation_ref before any new write.',
  user_message: 'The request is being checked before anything is sent again.',
});

export const missingApproval = (): ToolEnvelope => ({
  ok: false,
  code: 'MISSING_APPROVAL',
  category: 'authorization',
  commit_state: 'not_committed',
  retry: { directive: 'never', max_attempts_remaining: 1 },
  next_action: 'request_approval',
  operation_ref: REF,
  safe_details: {},
  agent_message: 'An approval is needed.',
  user_message: 'This needs an approval first.',
});

export const escalateNow = (): ToolEnvelope => ({
  ok: false,
  code: 'INVOICE_ALREADY_PAID',
  category: 'conflict',
  commit_state: 'not_committed',
  retry: { directive: 'never', max_attempts_remaining: 0 },
  next_action: 'escalate',
  operation_ref: REF,
  safe_details: {},
  agent_message: 'The invoice is already paid.',
  user_message: 'This invoice is already paid.',
});
