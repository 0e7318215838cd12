/**
 * given(events).when(fact).then(events) / .thenRefuses(code) for the decider. Events are
 * plain domain facts; ids and times are filled in so the tests read as the contract's table.
 */
import {
  decide,
  type Decision,
  DEFAULT_POLICY,
  fold,
  type LedgerEvent,
  type RecordedEvent,
  type StepPlannedData,
  type StepState,
  type SubmittedFact,
  type ToolEnvelope,
} from '@recovery-ledger/core';
import { seedEnvelopes } from './seed-envelopes';

export const T0 = '2026-12-02T10:00:00.000Z';
export const at = (ms: number) => new Date(Date.parse(T0) + ms).toISOString();
export const REF = 'run_81/step_4';

let counter = 0;
export const nextId = () => `00000000-0000-4000-8000-${(++counter).toString().padStart(12, '0')}`;

export function recorded(events: LedgerEvent[], times?: string[]): RecordedEvent[] {
  return events.map(
    (event, index) => ({ ...event, event_id: nextId(), recorded_at: times?.[index] ?? T0 }) as RecordedEvent,
  );
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
      this.history.push(
        ...recorded(
          decision.events,
          decision.events.map(() => now),
        ),
      );
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

export function planned(
  overrides: Omit<Partial<StepPlannedData>, 'policy'> & { policy?: Partial<StepPlannedData['policy']> } = {},
): SubmittedFact {
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

export const verified = (
  outcome: 'found_committed' | 'not_found' | 'lookup_unavailable',
  evidence_ref?: string,
): SubmittedFact => ({
  type: 'VerificationRecorded',
  data: { outcome, checked_at: T0, redactions: [], ...(evidence_ref ? { evidence_ref } : {}) },
});

export const approval = (decision: 'granted' | 'denied'): SubmittedFact => ({
  type: 'ApprovalRecorded',
  data: { decision, approver: 'ops@example.com' },
});

// ---- envelopes from the contract table, on REF ------------------------------------------------------------

export const success = (): ToolEnvelope => seedEnvelopes.success(REF, 'inv_123', T0);
export const invalidRecipient = (remaining = 1): ToolEnvelope => seedEnvelopes.invalidRecipient(REF, remaining);
export const rateLimited = (
  notBefore: string,
  remaining = 2,
  category: 'dependency' | 'conflict' = 'dependency',
): ToolEnvelope => seedEnvelopes.rateLimited(REF, notBefore, remaining, category);
export const outcomeUnknown = (): ToolEnvelope => seedEnvelopes.outcomeUnknown(REF);
export const missingApproval = (): ToolEnvelope => seedEnvelopes.missingApproval(REF);
export const escalateNow = (): ToolEnvelope => seedEnvelopes.alreadyPaid(REF);
