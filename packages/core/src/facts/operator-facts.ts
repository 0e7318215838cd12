import type { FromSchema } from './from-schema';

/** What a person found when they looked the operation up themselves. */
export const MANUAL_OUTCOMES = ['found_committed', 'not_found'] as const;

/** The most attempts one reopen may grant: a person gives a bounded budget, never an open one. */
export const MAX_REOPEN_ATTEMPTS = 10;

/**
 * A person's lookup of an attempt whose outcome is unknown (docs/contract.md §4.10): it resolves the
 * step as a verified lookup would, and is counted apart from automated verifications.
 * `found_committed` carries the evidence the person saw (`evidence_ref`, such as the invoice id).
 */
export const OUTCOME_VERIFIED_MANUALLY_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['outcome', 'note'],
  properties: {
    outcome: { type: 'string', enum: MANUAL_OUTCOMES },
    note: {
      type: 'string',
      minLength: 1,
      maxLength: 1000,
      description: 'What the person checked, for the evidence trail.',
    },
    evidence_ref: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: "Required with found_committed: what the person saw (such as the provider's invoice id).",
    },
  },
} as const;

/** A person ends the step: terminal, and every later dispatch is refused STEP_CANCELLED. */
export const STEP_CANCELLED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['reason'],
  properties: { reason: { type: 'string', minLength: 1, maxLength: 1000 } },
} as const;

/** A person gives an escalated step whose every outcome is known a new, bounded attempt budget. */
export const STEP_REOPENED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['attempts', 'reason'],
  properties: {
    attempts: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_REOPEN_ATTEMPTS,
      description: 'Attempts the step may make from now on, beyond those already used.',
    },
    reason: { type: 'string', minLength: 1, maxLength: 1000 },
  },
} as const;

/** A person takes an escalation: it leaves "Needs a person" and stays escalated until resolved. */
export const ESCALATION_ACKNOWLEDGED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['assignee'],
  properties: {
    assignee: { type: 'string', minLength: 1, maxLength: 200 },
    note: { type: 'string', maxLength: 1000 },
    reassign: {
      type: 'boolean',
      description:
        'Take the escalation from the assignee who has it; without it, naming another assignee is refused ESCALATION_ALREADY_ACKNOWLEDGED.',
    },
  },
} as const;

export type OutcomeVerifiedManuallyFactData = FromSchema<typeof OUTCOME_VERIFIED_MANUALLY_DATA_SCHEMA>;
export type StepCancelledFactData = FromSchema<typeof STEP_CANCELLED_DATA_SCHEMA>;
export type StepReopenedFactData = FromSchema<typeof STEP_REOPENED_DATA_SCHEMA>;
export type EscalationAcknowledgedFactData = FromSchema<typeof ESCALATION_ACKNOWLEDGED_DATA_SCHEMA>;
