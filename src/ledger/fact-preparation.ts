import { validateEnvelope } from '../domain/envelope/validate-envelope';
import type { EnvelopeLimits } from '../domain/envelope/envelope.types';
import { redactDeep, type SecretDetector } from '../domain/envelope/redaction';
import type { StepPolicy, SubmittedFact } from '../domain/events';
import { isPlanned, type StepState } from '../domain/step-state';
import { LedgerError } from '../errors/ledger-error';
import type { SubmittedEvent } from '../contract/ledger-api.types';

export interface PreparationSettings {
  envelopeLimits: EnvelopeLimits;
  defaultPolicy: StepPolicy;
}

/**
 * Turns a submitted event (shape checked at the edge) into a domain fact: the plan's policy filled
 * in with the defaults of the day (so a replay never depends on configuration), the envelope checked
 * against the step it is recorded on, and anything free-form redacted before it can be stored.
 */
export function prepareFact(
  submitted: SubmittedEvent,
  state: StepState,
  operationRef: string,
  settings: PreparationSettings,
  fieldPrefix: string,
  detect?: SecretDetector,
): SubmittedFact {
  const data = submitted.data as Record<string, any>;
  switch (submitted.type) {
    case 'StepPlanned': {
      const policy = { ...settings.defaultPolicy, ...(data.policy ?? {}) } as StepPolicy;
      if (policy.verification_tool === undefined) delete policy.verification_tool;
      return {
        type: 'StepPlanned',
        data: { run_id: data.run_id, tool: data.tool, side_effect: data.side_effect, input_hash: data.input_hash, policy },
      };
    }
    case 'AttemptDispatched':
      return { type: 'AttemptDispatched', data: { attempt: data.attempt, input_hash: data.input_hash } };
    case 'EnvelopeRecorded': {
      // Before the plan there is no side effect to judge the envelope by: the decider refuses it.
      const sideEffect = isPlanned(state) ? state.definition.side_effect : 'write';
      const checked = validateEnvelope(data.envelope, { operationRef, sideEffect, detect }, settings.envelopeLimits);
      if (!checked.ok) {
        throw new LedgerError('ENVELOPE_INVALID', `envelope.${checked.field} ${checked.reason}`, {
          field: `${fieldPrefix}.data.envelope.${checked.field}`,
        });
      }
      return {
        type: 'EnvelopeRecorded',
        data: { attempt: data.attempt, envelope: checked.envelope, redactions: checked.redactions },
      };
    }
    case 'VerificationRecorded': {
      const { value, redactions } = redactDeep({ evidence_ref: data.evidence_ref, result: data.result }, '', { detect });
      return {
        type: 'VerificationRecorded',
        data: {
          outcome: data.outcome,
          checked_at: data.checked_at,
          ...(value.evidence_ref === undefined ? {} : { evidence_ref: value.evidence_ref }),
          ...(value.result === undefined ? {} : { result: value.result }),
          redactions,
        },
      };
    }
    case 'ApprovalRecorded': {
      // Redacted like every free-form field; an approval's data has no `redactions` list (its shape
      // predates one), and a redacted approver or reason shows its marker in place.
      const { value } = redactDeep({ approver: data.approver, reason: data.reason }, '', { detect });
      return {
        type: 'ApprovalRecorded',
        data: {
          decision: data.decision,
          approver: value.approver,
          ...(value.reason === undefined ? {} : { reason: value.reason }),
        },
      };
    }
  }
}
