import { CLIENT_EVENT_ID_PREFIX } from '../domain/identifier-grammar';
import { OPERATOR_FACT_TYPES, SUBMITTED_FACT_TYPES, type SubmittedFactType } from '../domain/events';
import { APPROVAL_RECORDED_DATA_SCHEMA } from './approval-recorded';
import { ATTEMPT_DISPATCHED_DATA_SCHEMA } from './attempt-dispatched';
import { ENVELOPE_RECORDED_DATA_SCHEMA } from './envelope-recorded';
import {
  ESCALATION_ACKNOWLEDGED_DATA_SCHEMA,
  OUTCOME_VERIFIED_MANUALLY_DATA_SCHEMA,
  STEP_CANCELLED_DATA_SCHEMA,
  STEP_REOPENED_DATA_SCHEMA,
} from './operator-facts';
import { STEP_PLANNED_DATA_SCHEMA } from './step-planned';
import { VERIFICATION_RECORDED_DATA_SCHEMA } from './verification-recorded';

/**
 * Every fact a caller submits (docs/contract.md §3, §9): what it is for, and its data's schema, the
 * one definition from which its TypeScript type, the submit route's validation and the OpenAPI
 * document all come.
 */
export const SUBMITTED_FACTS = {
  StepPlanned: {
    data: STEP_PLANNED_DATA_SCHEMA,
    description: 'Plan a step (the same definition again is a no-op; another one is refused).',
  },
  AttemptDispatched: { data: ATTEMPT_DISPATCHED_DATA_SCHEMA, description: 'Ask to dispatch an attempt: the gate.' },
  EnvelopeRecorded: {
    data: ENVELOPE_RECORDED_DATA_SCHEMA,
    description: "The tool's envelope for the attempt in flight.",
  },
  VerificationRecorded: {
    data: VERIFICATION_RECORDED_DATA_SCHEMA,
    description: 'The outcome of the lookup by operation_ref.',
  },
  ApprovalRecorded: { data: APPROVAL_RECORDED_DATA_SCHEMA, description: 'An approval granted or denied, by whom.' },
  OutcomeVerifiedManually: {
    data: OUTCOME_VERIFIED_MANUALLY_DATA_SCHEMA,
    description: "A person's lookup of an unknown outcome (operator keys).",
  },
  StepCancelled: {
    data: STEP_CANCELLED_DATA_SCHEMA,
    description: 'A person ends the step; later dispatches are refused (operator keys).',
  },
  StepReopened: {
    data: STEP_REOPENED_DATA_SCHEMA,
    description: 'A new, bounded attempt budget for an escalated step whose outcomes are known (operator keys).',
  },
  EscalationAcknowledged: {
    data: ESCALATION_ACKNOWLEDGED_DATA_SCHEMA,
    description: 'A person takes an escalation; it stays escalated until resolved (operator keys).',
  },
} as const satisfies Record<SubmittedFactType, { data: object; description: string }>;

export { OPERATOR_FACT_TYPES, SUBMITTED_FACT_TYPES };

export const EVENT_ID_SCHEMA = {
  type: 'string',
  format: 'uuid',
  pattern: CLIENT_EVENT_ID_PREFIX.source,
  description:
    'Chosen by the client before the first send; resubmitting it is a no-op. Not a version 8 UUID: those are the ids the ledger derives.',
} as const;

export const EXPECTED_REVISION_SCHEMA = {
  type: 'integer',
  minimum: -1,
  description: 'The stream revision the client read; -1 for a new operation.',
} as const;

/** The most events the body's shape allows; the service's own limit (LEDGER_MAX_EVENTS_PER_SUBMIT) is lower. */
export const MAX_EVENTS_IN_BODY = 10000;

/**
 * The submit body as it is read first: the revision, and each event's id, type and that its data is
 * an object. Each event's data is read after, against its type's schema in SUBMITTED_FACTS.
 */
export const SUBMIT_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['events'],
  properties: {
    expected_revision: EXPECTED_REVISION_SCHEMA,
    events: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_EVENTS_IN_BODY,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['event_id', 'type', 'data'],
        properties: {
          event_id: EVENT_ID_SCHEMA,
          type: { type: 'string', enum: SUBMITTED_FACT_TYPES },
          data: { type: 'object' },
        },
      },
    },
  },
} as const;
