import type { OpenAPIObject } from '@nestjs/swagger';
import { envelopeJsonSchema } from '@recovery-ledger/core/domain/envelope/envelope.schema';
import {
  MANUAL_OUTCOMES,
  MAX_CALL_WINDOW_MS,
  MAX_REOPEN_ATTEMPTS,
  SIDE_EFFECTS,
  SUBMITTED_FACT_TYPES,
  VERIFICATION_OUTCOMES,
} from '@recovery-ledger/core/domain/events';
import { APPROVAL_RECORDED_DATA_SCHEMA } from '@recovery-ledger/core/facts/approval-recorded';
import { CLIENT_EVENT_ID_PREFIX, IDENTIFIER_PATTERN } from '@recovery-ledger/core/domain/identifier-grammar';
import { SUBMIT_EXAMPLES } from './submit-examples';

/**
 * The submit body, typed per fact: each submitted event is one of nine shapes told apart by `type`
 * (a discriminator), each `data` with the fields and bounds the edge validation
 * (src/http/dto/submit-events.dto.ts) applies, and the envelope as the same schema the service
 * publishes at /v1/schema/envelope, with the examples of ./submit-examples. The OpenAPI document
 * publishes these schemas and the submit route compiles its validator from them
 * (src/http/submit-body.validator.ts); a differential test holds them to the DTOs.
 */

export type Schema = Record<string, unknown>;
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const identifier = (maxLength: number, description?: string): Schema => ({
  type: 'string',
  minLength: 1,
  maxLength,
  pattern: IDENTIFIER_PATTERN.source,
  ...(description ? { description } : {}),
});
const instant: Schema = { type: 'string', format: 'date-time' };

/**
 * The envelope's JSON Schema (draft 2020-12) as an OpenAPI 3.0 schema: `const` becomes a one-value
 * `enum`, and the cross-field rules (if/then) and key allowlist, which 3.0 cannot say, are left
 * to the published JSON Schema and the 422 ENVELOPE_INVALID that names the field.
 */
function toOpenApi30(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toOpenApi30);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema as Schema)) {
    if (key === 'allOf' || key === 'propertyNames' || key === '$schema' || key === '$id') continue;
    if (key === 'const') out.enum = [value];
    else out[key] = toOpenApi30(value);
  }
  return out;
}

/** The schemas of the submit body by name, with `#/components/schemas/<name>` references. */
export const factSchemas = (): Record<string, Schema> => {
  const envelope = envelopeJsonSchema();
  const defs = (toOpenApi30(envelope) as { $defs: Record<string, Schema> }).$defs;
  const fact = (type: string, data: string, description: string): Schema => ({
    type: 'object',
    description,
    additionalProperties: false,
    required: ['event_id', 'type', 'data'],
    properties: {
      event_id: {
        type: 'string',
        format: 'uuid',
        pattern: CLIENT_EVENT_ID_PREFIX.source,
        description:
          'Chosen by the client before the first send; resubmitting it is a no-op. Not a version 8 UUID: those are the ids the ledger derives.',
      },
      type: { type: 'string', enum: [type] },
      data: ref(data),
    },
  });
  return {
    ToolSuccess: { ...defs.ToolSuccess, description: 'A tool that committed and can show it.' },
    ToolError: { ...defs.ToolError, description: 'A tool that failed: what is known, what is safe next.' },
    ToolEnvelope: {
      description: String(envelope.description),
      oneOf: [ref('ToolSuccess'), ref('ToolError')],
    },
    StepPolicy: {
      type: 'object',
      additionalProperties: false,
      properties: {
        max_attempts: {
          type: 'integer',
          minimum: 1,
          maximum: 100,
          description: 'Attempts in all, the first included (default 3).',
        },
        consistency_window_ms: {
          type: 'integer',
          minimum: 0,
          maximum: 86400000,
          description: 'How long after a dispatch not_found is inconclusive (default 30000).',
        },
        verification_tool: identifier(100, 'The tool that looks the operation up by its operation_ref.'),
        max_consecutive_dependency_failures: {
          type: 'integer',
          minimum: 1,
          maximum: 100,
          description: 'Consecutive dependency failures before the step escalates (default 3).',
        },
        dispatch_timeout_ms: {
          type: 'integer',
          minimum: 1000,
          maximum: 86400000,
          description:
            'With no envelope and no live lease this long after a dispatch, the work feed hands the step out for verification.',
        },
      },
    },
    StepPlannedData: {
      type: 'object',
      additionalProperties: false,
      required: ['run_id', 'tool', 'side_effect', 'input_hash'],
      properties: {
        run_id: identifier(200),
        tool: identifier(100),
        side_effect: { type: 'string', enum: [...SIDE_EFFECTS] },
        input_hash: identifier(
          200,
          'A hash of the canonical input: an unchanged retry after correct_input is refused by it.',
        ),
        policy: ref('StepPolicy'),
        input: {
          description:
            "The tool's input, for the work feed to hand to a worker; its canonical SHA-256 must be input_hash.",
        },
      },
    },
    AttemptDispatchedData: {
      type: 'object',
      additionalProperties: false,
      required: ['attempt', 'input_hash'],
      properties: {
        attempt: { type: 'integer', minimum: 1, maximum: 1000 },
        input_hash: identifier(200),
        call_window_ms: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_CALL_WINDOW_MS,
          description:
            "The longest the dispatcher keeps its call open: it starts the call within it and aborts it at its end. The ledger records the call deadline (the smallest of this, the plan's dispatch_timeout_ms and the lease it was sent under); a not_found is conclusive only a consistency window after it.",
        },
      },
    },
    EnvelopeRecordedData: {
      type: 'object',
      additionalProperties: false,
      required: ['attempt', 'envelope'],
      properties: { attempt: { type: 'integer', minimum: 1, maximum: 1000 }, envelope: ref('ToolEnvelope') },
    },
    VerificationRecordedData: {
      type: 'object',
      additionalProperties: false,
      required: ['outcome', 'checked_at'],
      properties: {
        outcome: { type: 'string', enum: [...VERIFICATION_OUTCOMES] },
        checked_at: instant,
        evidence_ref: { type: 'string', minLength: 1, maxLength: 200 },
        result: { description: 'What the lookup found; redacted of secrets before it is stored.' },
      },
    },
    // One definition: the fact's own schema literal, from which its TypeScript type also comes.
    ApprovalRecordedData: APPROVAL_RECORDED_DATA_SCHEMA,
    OutcomeVerifiedManuallyData: {
      type: 'object',
      additionalProperties: false,
      required: ['outcome', 'note'],
      properties: {
        outcome: { type: 'string', enum: [...MANUAL_OUTCOMES] },
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
    },
    StepCancelledData: {
      type: 'object',
      additionalProperties: false,
      required: ['reason'],
      properties: { reason: { type: 'string', minLength: 1, maxLength: 1000 } },
    },
    StepReopenedData: {
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
    },
    EscalationAcknowledgedData: {
      type: 'object',
      additionalProperties: false,
      required: ['assignee'],
      properties: {
        assignee: { type: 'string', minLength: 1, maxLength: 200 },
        note: { type: 'string', maxLength: 1000 },
      },
    },
    OutcomeVerifiedManuallyFact: fact(
      'OutcomeVerifiedManually',
      'OutcomeVerifiedManuallyData',
      "A person's lookup of an unknown outcome (operator keys).",
    ),
    StepCancelledFact: fact(
      'StepCancelled',
      'StepCancelledData',
      'A person ends the step; later dispatches are refused (operator keys).',
    ),
    StepReopenedFact: fact(
      'StepReopened',
      'StepReopenedData',
      'A new, bounded attempt budget for an escalated step whose outcomes are known (operator keys).',
    ),
    EscalationAcknowledgedFact: fact(
      'EscalationAcknowledged',
      'EscalationAcknowledgedData',
      'A person takes an escalation; it stays escalated until resolved (operator keys).',
    ),
    StepPlannedFact: fact(
      'StepPlanned',
      'StepPlannedData',
      'Plan a step (the same definition again is a no-op; another one is refused).',
    ),
    AttemptDispatchedFact: fact('AttemptDispatched', 'AttemptDispatchedData', 'Ask to dispatch an attempt: the gate.'),
    EnvelopeRecordedFact: fact(
      'EnvelopeRecorded',
      'EnvelopeRecordedData',
      "The tool's envelope for the attempt in flight.",
    ),
    VerificationRecordedFact: fact(
      'VerificationRecorded',
      'VerificationRecordedData',
      'The outcome of the lookup by operation_ref.',
    ),
    ApprovalRecordedFact: fact('ApprovalRecorded', 'ApprovalRecordedData', 'An approval granted or denied, by whom.'),
    SubmittedEventDto: {
      type: 'object',
      description: 'One fact, shaped by its type.',
      oneOf: SUBMITTED_FACT_TYPES.map((type) => ref(`${type}Fact`)),
      discriminator: {
        propertyName: 'type',
        mapping: Object.fromEntries(SUBMITTED_FACT_TYPES.map((type) => [type, `#/components/schemas/${type}Fact`])),
      },
    },
    SubmitEventsDto: {
      type: 'object',
      additionalProperties: false,
      required: ['events'],
      properties: {
        expected_revision: {
          type: 'integer',
          minimum: -1,
          description: 'The stream revision the client read; -1 for a new operation.',
        },
        events: { type: 'array', minItems: 1, maxItems: 10000, items: ref('SubmittedEventDto') },
      },
    },
  };
};

/** The groups of operations, in the order a reader meets them. */
export const TAGS = [
  { name: 'operations', description: 'Submit facts about one operation and read its state and events.' },
  {
    name: 'evidence',
    description: 'The evidence trail of an operation: what was tried, what came back, how the outcome was proven.',
  },
  { name: 'runs', description: 'The steps of a run and where each stands.' },
  { name: 'recovery', description: 'Operations in flight or being verified, for a restarted worker.' },
  {
    name: 'triage',
    description: 'What needs a person now, the lists behind the console, and the change feed it follows.',
  },
  { name: 'work', description: 'The work feed: due steps handed to workers under leases.' },
  {
    name: 'metrics',
    description: 'Trust metrics: unknown outcomes and how they were resolved, duplicates prevented, escalations.',
  },
  { name: 'schema', description: "The envelope's JSON Schema." },
  {
    name: 'admin',
    description: 'Projection rebuild, log export and verification, webhook subscriptions (admin keys).',
  },
  { name: 'webhooks', description: 'Signed notifications of what needs a person, and their deliveries.' },
  { name: 'health', description: 'Liveness and readiness probes.' },
  { name: 'observability', description: 'Prometheus metrics.' },
];

/** Types the submit body per fact, adds the examples, the tags and the local-mode server. */
export function typeFacts(document: OpenAPIObject): OpenAPIObject {
  const schemas = (document.components ??= {}).schemas ?? {};
  Object.assign(schemas, factSchemas());
  document.components.schemas = schemas;
  const submit = document.paths['/v1/operations/{ref}/events']?.post;
  const media = (submit?.requestBody as { content?: Record<string, { examples?: unknown }> } | undefined)?.content?.[
    'application/json'
  ];
  if (media) {
    media.examples = Object.fromEntries(
      Object.entries(SUBMIT_EXAMPLES).map(([name, example]) => [
        name,
        { summary: `${example.summary} (${example.ref})`, value: example.value },
      ]),
    );
  }
  document.tags = TAGS;
  document.servers = [
    { url: 'http://127.0.0.1:3000', description: 'Local mode: loopback only, no key (PORT changes the port).' },
  ];
  return document;
}
