import Ajv from 'ajv';
import { isUUID } from 'class-validator';
import { factSchemas, type Schema } from '../openapi/fact-schemas';
import { isRfc3339Instant } from '@recovery-ledger/core/shared/rfc3339';

/**
 * The submit body's schemas (src/openapi/fact-schemas.ts, the ones the OpenAPI document
 * publishes) compiled once into one function, for the hot path of a submit. It only ever says
 * "this body is valid": a body it refuses goes through the DTOs (./dto/submit-events.dto.ts),
 * whose messages and fields are the contract of a 400 (docs/contract.md §9). So it may be
 * stricter than the DTOs, never looser; test/unit/http/submit-body.property.unit.spec.ts holds it
 * to that, and holds the two to the same answers on the bodies both accept.
 *
 * Three differences from the published schemas, each only ever stricter:
 * - the envelope is only an object here, as in the DTO: it is checked in depth once, against the
 *   step it is recorded on (422 ENVELOPE_INVALID);
 * - a bounded-length string holding U+FE0E or U+FE0F goes to the DTOs: they count a character
 *   followed by a variation selector as one, JSON Schema as two;
 * - the formats are the DTOs' own predicates (class-validator's isUUID for 'uuid', the service's
 *   RFC 3339 instant for 'date-time'), not a format library's looser ones.
 */

const FROM = '#/components/schemas/';
const VARIATION_SELECTOR = '[\\uFE0E\\uFE0F]';

function forRuntime(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forRuntime);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema as Schema)) {
    // Ajv reads the discriminator from the oneOf branches themselves and refuses a mapping.
    if (key === 'discriminator') out[key] = { propertyName: (value as { propertyName: string }).propertyName };
    else if (key === '$ref' && typeof value === 'string' && value.startsWith(FROM))
      out[key] = `#/$defs/${value.slice(FROM.length)}`;
    else out[key] = forRuntime(value);
  }
  const bounded = out.type === 'string' && (out.minLength !== undefined || out.maxLength !== undefined);
  if (bounded) out.not = { type: 'string', pattern: VARIATION_SELECTOR };
  return out;
}

/** The JSON Schema the submit route compiles: the whole body, each event's data by its type. */
export function submitBodyJsonSchema(): Schema {
  const schemas = factSchemas();
  const defs: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    if (name === 'ToolSuccess' || name === 'ToolError' || name === 'ToolEnvelope') continue;
    defs[name] = forRuntime(schema);
  }
  const envelopeData = defs.EnvelopeRecordedData as { properties: Record<string, unknown> };
  envelopeData.properties = { ...envelopeData.properties, envelope: { type: 'object' } };
  return { $ref: '#/$defs/SubmitEventsDto', $defs: defs };
}

export type BodyCheck = (body: unknown) => boolean;

/** Compiled once per process: Ajv builds the function from the schema's source. */
export function compileSubmitBody(): BodyCheck {
  const ajv = new Ajv({ strict: true, discriminator: true, allErrors: false, messages: false });
  ajv.addFormat('uuid', { type: 'string', validate: (value: string) => isUUID(value, 'all') });
  ajv.addFormat('date-time', { type: 'string', validate: (value: string) => isRfc3339Instant(value) });
  const check = ajv.compile(submitBodyJsonSchema());
  return (body) => check(body) === true;
}
