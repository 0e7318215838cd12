import type { OpenAPIObject } from '@nestjs/swagger';
import {
  envelopeJsonSchema,
  EVENT_ID_SCHEMA,
  EXPECTED_REVISION_SCHEMA,
  MAX_EVENTS_IN_BODY,
  OPERATOR_FACT_TYPES,
  STEP_POLICY_SCHEMA,
  SUBMITTED_FACT_TYPES,
  SUBMITTED_FACTS,
} from '@recovery-ledger/core';
import { operatorFactsSchemas } from './operator-facts-schemas';
import { SUBMIT_EXAMPLES } from './submit-examples';

/**
 * The submit body, typed per fact, as the OpenAPI document publishes it: each submitted event is
 * one of the facts of SUBMITTED_FACTS (packages/core/src/facts, their one definition) told apart by
 * `type` (a discriminator), the step policy and the envelope as named schemas (the envelope the
 * same one the service publishes at /v1/schema/envelope), with the examples of ./submit-examples.
 */

export type Schema = Record<string, unknown>;
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

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

/** A fact's data as published: the policy and the envelope by reference, to their named schemas. */
function publishedData(type: keyof typeof SUBMITTED_FACTS): Schema {
  const schema = SUBMITTED_FACTS[type].data as { properties: Schema };
  const properties: Schema = { ...schema.properties };
  if ('policy' in properties) properties.policy = ref('StepPolicy');
  if ('envelope' in properties) properties.envelope = ref('ToolEnvelope');
  return { ...schema, properties };
}

/** The schemas of the submit body by name, with `#/components/schemas/<name>` references. */
export const factSchemas = (): Record<string, Schema> => {
  const envelope = envelopeJsonSchema();
  const defs = (toOpenApi30(envelope) as { $defs: Record<string, Schema> }).$defs;
  const fact = (type: keyof typeof SUBMITTED_FACTS): Schema => ({
    type: 'object',
    description: SUBMITTED_FACTS[type].description,
    additionalProperties: false,
    required: ['event_id', 'type', 'data'],
    properties: { event_id: EVENT_ID_SCHEMA, type: { type: 'string', enum: [type] }, data: ref(`${type}Data`) },
  });
  // Named in the order the document has always listed them.
  const dataFirst = SUBMITTED_FACT_TYPES.filter((type) => !OPERATOR_FACT_TYPES.some((operator) => operator === type));
  const factOrder = [...OPERATOR_FACT_TYPES, ...dataFirst];
  return {
    ToolSuccess: { ...defs.ToolSuccess, description: 'A tool that committed and can show it.' },
    ToolError: { ...defs.ToolError, description: 'A tool that failed: what is known, what is safe next.' },
    ToolEnvelope: {
      description: String(envelope.description),
      oneOf: [ref('ToolSuccess'), ref('ToolError')],
    },
    StepPolicy: STEP_POLICY_SCHEMA,
    ...Object.fromEntries([...dataFirst, ...OPERATOR_FACT_TYPES].map((type) => [`${type}Data`, publishedData(type)])),
    ...Object.fromEntries(factOrder.map((type) => [`${type}Fact`, fact(type)])),
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
        expected_revision: EXPECTED_REVISION_SCHEMA,
        events: { type: 'array', minItems: 1, maxItems: MAX_EVENTS_IN_BODY, items: ref('SubmittedEventDto') },
      },
    },
    ...operatorFactsSchemas(),
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
  const facts = factSchemas();
  const { SubmittedEventDto, SubmitEventsDto } = facts;
  // The submit body's schemas lead the document's list, where they have always stood.
  document.components = document.components ?? {};
  document.components.schemas = { SubmittedEventDto, SubmitEventsDto, ...document.components.schemas, ...facts };
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
