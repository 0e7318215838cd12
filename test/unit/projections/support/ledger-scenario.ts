import { randomUUID } from 'node:crypto';
import { seedEnvelopes } from '../../../../packages/core/test/support/seed-envelopes';
import {
  DEFAULT_ENVELOPE_LIMITS,
  DEFAULT_POLICY,
  LedgerProblem,
  type SubmitAnswer,
  type SubmittedEvent,
} from '@recovery-ledger/core';
import type { Clock } from '../../../../src/shared/clock';
import { LedgerService } from '../../../../src/ledger/ledger.service';
import type { EventStore, StoredEvent } from '../../../../src/store/event-store.port';
import { MemoryEventStore } from './memory-event-store';

export class ManualClock implements Clock {
  constructor(public ms = Date.parse('2026-03-01T09:00:00.000Z')) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export type SubmitOutcome = { ok: true; answer: SubmitAnswer } | { ok: false; code: string };

/**
 * Drives the real command path (LedgerService: fold, decide, append) with a manual clock, so the
 * histories projections are tested on are exactly what the ledger writes, refusals included.
 */
export class LedgerScenario {
  readonly ledger: LedgerService;

  constructor(
    readonly store: EventStore = new MemoryEventStore(),
    readonly clock: ManualClock = new ManualClock(),
    readonly tenant = 'acme',
    readonly actor = 'key_runtime1',
  ) {
    this.ledger = new LedgerService(store, clock, {
      envelopeLimits: DEFAULT_ENVELOPE_LIMITS,
      defaultPolicy: DEFAULT_POLICY,
      maxConflictRetries: 5,
    });
  }

  async submit(
    ref: string,
    type: SubmittedEvent['type'],
    data: Record<string, unknown>,
    options: { tenant?: string; eventId?: string } = {},
  ): Promise<SubmitOutcome> {
    try {
      const answer = await this.ledger.submit(
        { tenant: options.tenant ?? this.tenant, actor: this.actor, operationRef: ref },
        { events: [{ event_id: options.eventId ?? randomUUID(), type, data: data as SubmittedEvent['data'] }] },
      );
      return { ok: true, answer };
    } catch (error) {
      if (error instanceof LedgerProblem) return { ok: false, code: error.code };
      throw error;
    }
  }

  plan(
    ref: string,
    options: {
      run_id?: string;
      tool?: string;
      side_effect?: 'read' | 'write';
      input_hash?: string;
      policy?: Record<string, unknown>;
      tenant?: string;
    } = {},
  ) {
    const { tenant, ...rest } = options;
    return this.submit(
      ref,
      'StepPlanned',
      { run_id: 'run_81', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1', ...rest },
      { tenant },
    );
  }

  dispatch(ref: string, attempt: number, inputHash = 'h1', tenant?: string) {
    return this.submit(ref, 'AttemptDispatched', { attempt, input_hash: inputHash }, { tenant });
  }

  envelope(ref: string, attempt: number, envelope: object, tenant?: string) {
    return this.submit(ref, 'EnvelopeRecorded', { attempt, envelope }, { tenant });
  }

  verify(
    ref: string,
    outcome: 'found_committed' | 'not_found' | 'lookup_unavailable',
    evidenceRef?: string,
    tenant?: string,
  ) {
    return this.submit(
      ref,
      'VerificationRecorded',
      { outcome, checked_at: this.clock.now().toISOString(), ...(evidenceRef ? { evidence_ref: evidenceRef } : {}) },
      { tenant },
    );
  }

  approve(ref: string, decision: 'granted' | 'denied', approver = 'alice') {
    return this.submit(ref, 'ApprovalRecorded', { decision, approver });
  }

  async log(): Promise<StoredEvent[]> {
    return this.store.readAll({ after: 0, limit: Number.MAX_SAFE_INTEGER });
  }
}

/** The contract's envelopes, for `ref`. */
export const envelopes = {
  committed: (ref: string, evidenceRef?: string) =>
    seedEnvelopes.success(ref, evidenceRef, '2026-03-01T09:00:01.000Z', { id: evidenceRef ?? 'inv_1' }),
  unknown: (ref: string, verificationTool?: string) => seedEnvelopes.outcomeUnknown(ref, verificationTool),
  invalidInput: (ref: string, field?: string) => seedEnvelopes.invalidRecipient(ref, 1, field),
  rateLimited: (ref: string, notBefore: string, remaining = 2) => seedEnvelopes.rateLimited(ref, notBefore, remaining),
  needsApproval: (ref: string) => seedEnvelopes.missingApproval(ref),
  conflict: (ref: string) => seedEnvelopes.alreadyPaid(ref),
};

export function expectOk(outcome: SubmitOutcome): SubmitAnswer {
  if (!outcome.ok) throw new Error(`expected the submit to be accepted, got ${outcome.code}`);
  return outcome.answer;
}
