import { CLIENT_EVENT_ID_PREFIX } from '../domain/identifier-grammar';
import {
  OPERATOR_FACT_TYPES,
  SUBMITTED_FACT_TYPES,
  type OperatorFactType,
  type SubmittedFactType,
} from '../domain/events';
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

/** Who may submit a fact (docs/contract.md §8; `src/auth/roles.ts` applies it). */
export type FactRecorder = 'runtime' | 'approver' | 'operator';

/**
 * The webhook notifications a fact calls for by itself (docs/webhooks.md); most facts notify only
 * through the transition they cause, and say `null`.
 */
export type FactNotification =
  'operation.verified_manually' | 'operation.cancelled' | 'operation.reopened' | 'escalation.acknowledged';

/** A fact's one home: everything else about it (the CLI, webhooks, the console, OpenAPI) is read from here. */
export interface FactDefinition<Type extends SubmittedFactType> {
  /** Its data's schema: the one definition of its type, its validation and its published form. */
  data: object;
  description: string;
  /** Operator facts are the operator's alone (`OPERATOR_FACT_TYPES` must say the same; checked below). */
  recordedBy: Type extends OperatorFactType ? 'operator' : Exclude<FactRecorder, 'operator'>;
  notifies: FactNotification | null;
  /** Its line in `recovery-ledger replay` and `tail`, from its stored data. */
  replay(data: Record<string, unknown>): string;
}

const text = (value: unknown): string => (typeof value === 'string' || typeof value === 'number' ? String(value) : '?');
const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/**
 * Every fact a caller submits (docs/contract.md §3, §9): what it is for, and its data's schema, the
 * one definition from which its TypeScript type, the submit route's validation and the OpenAPI
 * document all come; who may submit it, what it notifies, and its replay line. Its evidence-trail
 * entry is in projections/src/evidence-trail (the type checker names a fact missing there), its
 * rules in domain/decide.ts.
 */
export const SUBMITTED_FACTS = {
  StepPlanned: {
    data: STEP_PLANNED_DATA_SCHEMA,
    description: 'Plan a step (the same definition again is a no-op; another one is refused).',
    recordedBy: 'runtime',
    notifies: null,
    replay: (data) => {
      const policy = record(data.policy);
      const bound = policy.max_attempts === undefined ? '' : `, at most ${text(policy.max_attempts)} attempts`;
      return `planned ${text(data.side_effect)} ${text(data.tool)} in run ${text(data.run_id)}${bound}`;
    },
  },
  AttemptDispatched: {
    data: ATTEMPT_DISPATCHED_DATA_SCHEMA,
    description: 'Ask to dispatch an attempt: the gate.',
    recordedBy: 'runtime',
    notifies: null,
    replay: (data) => `attempt ${text(data.attempt)} dispatched with input ${text(data.input_hash)}`,
  },
  EnvelopeRecorded: {
    data: ENVELOPE_RECORDED_DATA_SCHEMA,
    description: "The tool's envelope for the attempt in flight.",
    recordedBy: 'runtime',
    notifies: null,
    replay: (data) => {
      const envelope = record(data.envelope);
      if (envelope.ok === true) {
        const evidence = record(envelope.verification).evidence_ref;
        return `attempt ${text(data.attempt)} committed${evidence ? `, evidence ${text(evidence)}` : ''}`;
      }
      return `attempt ${text(data.attempt)} failed: ${text(envelope.code)} (${text(envelope.category)}, ${text(envelope.commit_state)}), tool says ${text(envelope.next_action)}`;
    },
  },
  VerificationRecorded: {
    data: VERIFICATION_RECORDED_DATA_SCHEMA,
    description: 'The outcome of the lookup by operation_ref.',
    recordedBy: 'runtime',
    notifies: null,
    replay: (data) =>
      `lookup by operation_ref: ${text(data.outcome)}${data.evidence_ref ? `, evidence ${text(data.evidence_ref)}` : ''}`,
  },
  ApprovalRecorded: {
    data: APPROVAL_RECORDED_DATA_SCHEMA,
    description: 'An approval granted or denied, by whom.',
    // A runtime key too when LEDGER_ALLOW_SELF_APPROVAL is set (src/auth/roles.ts).
    recordedBy: 'approver',
    notifies: null,
    replay: (data) =>
      `approval ${text(data.decision)} by ${text(data.approver)}${data.reason ? `: ${text(data.reason)}` : ''}`,
  },
  OutcomeVerifiedManually: {
    data: OUTCOME_VERIFIED_MANUALLY_DATA_SCHEMA,
    description: "A person's lookup of an unknown outcome (operator keys).",
    recordedBy: 'operator',
    notifies: 'operation.verified_manually',
    replay: (data) =>
      `a person looked the operation up: ${text(data.outcome)}${data.evidence_ref ? `, evidence ${text(data.evidence_ref)}` : ''} (${text(data.note)})`,
  },
  StepCancelled: {
    data: STEP_CANCELLED_DATA_SCHEMA,
    description: 'A person ends the step; later dispatches are refused (operator keys).',
    recordedBy: 'operator',
    notifies: 'operation.cancelled',
    replay: (data) => `cancelled by a person: ${text(data.reason)}`,
  },
  StepReopened: {
    data: STEP_REOPENED_DATA_SCHEMA,
    description: 'A new, bounded attempt budget for an escalated step whose outcomes are known (operator keys).',
    recordedBy: 'operator',
    notifies: 'operation.reopened',
    replay: (data) => `reopened by a person with ${text(data.attempts)} more attempt(s): ${text(data.reason)}`,
  },
  EscalationAcknowledged: {
    data: ESCALATION_ACKNOWLEDGED_DATA_SCHEMA,
    description: 'A person takes an escalation; it stays escalated until resolved (operator keys).',
    recordedBy: 'operator',
    notifies: 'escalation.acknowledged',
    replay: (data) =>
      `escalation acknowledged, assigned to ${text(data.assignee)}${data.note ? `: ${text(data.note)}` : ''}`,
  },
} as const satisfies { readonly [Type in SubmittedFactType]: FactDefinition<Type> };

export function isSubmittedFactType(type: string): type is SubmittedFactType {
  return Object.prototype.hasOwnProperty.call(SUBMITTED_FACTS, type);
}

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
