import type * as ClassValidator from 'class-validator';
import {
  CLIENT_EVENT_ID_PREFIX,
  IDENTIFIER_PATTERN,
  isRfc3339Instant,
  LedgerProblem,
  SUBMIT_BODY_SCHEMA,
  type SubmitRequest,
  SUBMITTED_FACTS,
  type SubmittedFactType,
} from '@recovery-ledger/core';

/**
 * Reads a value against one of the fact schemas (packages/core/src/facts, the submit body's one
 * definition) and answers its first violation as the 400 of docs/contract.md §9 names it: the
 * field as a dotted path (`events[0].data.tool`) and the reason, in the words and the order the
 * route has always answered them. The order, per object: a key the schema does not know first (in
 * the body's own key order), then each property in the schema's order; per value, the first of its
 * rules that fails, in RULE_ORDER's order (pattern, maxLength, minLength, format, enum, maximum,
 * minimum, maxItems, minItems, type), then its items or properties. A missing optional property is
 * not read; a missing required one is read as `undefined`, so it fails its first rule.
 *
 * Lengths count a character with its variation selector (U+FE0E, U+FE0F) as one, and a surrogate
 * pair as one (class-validator's `maxLength`); formats are the service's own predicates.
 */

/**
 * class-validator's predicates, each loaded from its own file: the package's index loads every
 * decorator it has and libphonenumber-js, about 300 modules and a tenth of a second of every start
 * of the service, for the eleven read here. Typed by the index, which is never loaded.
 */
function predicate<K extends keyof typeof ClassValidator>(file: string, name: K): (typeof ClassValidator)[K] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- one file of the package, not its index
  const loaded = (require(`class-validator/cjs/decorator/${file}`) as typeof ClassValidator)[name];
  if (typeof loaded !== 'function') throw new Error(`class-validator/cjs/decorator/${file} has no ${name}`);
  return loaded;
}
const arrayMaxSize = predicate('array/ArrayMaxSize', 'arrayMaxSize');
const arrayMinSize = predicate('array/ArrayMinSize', 'arrayMinSize');
const isIn = predicate('common/IsIn', 'isIn');
const isInt = predicate('typechecker/IsInt', 'isInt');
const isObject = predicate('typechecker/IsObject', 'isObject');
const isUUID = predicate('string/IsUUID', 'isUUID');
const matches = predicate('string/Matches', 'matches');
const max = predicate('number/Max', 'max');
const maxLength = predicate('string/MaxLength', 'maxLength');
const min = predicate('number/Min', 'min');
const minLength = predicate('string/MinLength', 'minLength');

export interface FieldSchema {
  readonly type?: string;
  readonly enum?: readonly unknown[];
  readonly pattern?: string;
  readonly format?: string;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly items?: FieldSchema;
  readonly properties?: Readonly<Record<string, FieldSchema>>;
  readonly required?: readonly string[];
  /**
   * One reason for any violation at or beneath this value, named at this value: for a field whose
   * rules read better as one sentence (a webhook's `url`) than one rule at a time.
   */
  readonly reason?: string;
  /** How a key the object does not know is answered, after the key itself (default: `property <key> should not exist`). */
  readonly unknownKeyReason?: string;
}

export interface Violation {
  field: string;
  reason: string;
}

/**
 * A client event id breaks its pattern when it is no UUID at all (missing, empty, another shape) as
 * well as when it is a version 8 one: the reason names which, so an empty id is not told about
 * versions.
 */
function clientEventIdReason(value: unknown): string {
  if (value === undefined) return 'is missing: each event needs a UUID of its own (any version but 8)';
  if (value === '') return 'must not be empty: a UUID (any version but 8)';
  if (!(typeof value === 'string' && isUUID(value, 'all'))) return 'must be a UUID';
  return 'must not be a version 8 UUID: those are the ids the ledger derives';
}

/** What a pattern asks, in words: the patterns of the identifier grammar and of a client event id. */
const PATTERN_RULES: Record<string, (value: unknown) => string> = {
  [IDENTIFIER_PATTERN.source]: () =>
    'must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
  [CLIENT_EVENT_ID_PREFIX.source]: clientEventIdReason,
};

/** An http or https URL that carries no credentials (a webhook's address). */
function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password;
}

const FORMAT_RULES: Record<string, { holds: (value: unknown) => boolean; reason: string }> = {
  'http-url': { holds: isHttpUrl, reason: 'must be an http or https URL without credentials' },
  uuid: { holds: (value) => typeof value === 'string' && isUUID(value, 'all'), reason: 'must be a UUID' },
  'date-time': {
    holds: isRfc3339Instant,
    reason: 'must be an RFC 3339 instant with a time zone, on a real date',
  },
};

const TYPE_RULES: Record<string, { holds: (value: unknown) => boolean; reason: string }> = {
  string: { holds: (value) => typeof value === 'string', reason: 'must be a string' },
  integer: { holds: (value) => isInt(value), reason: 'must be an integer number' },
  object: { holds: (value) => isObject(value), reason: 'must be an object' },
  array: { holds: (value) => Array.isArray(value), reason: 'must be an array' },
};

type Rule = (schema: FieldSchema, value: unknown) => string | undefined;

/** Each rule answers its reason when the schema has it and the value breaks it. */
const RULE_ORDER: Rule[] = [
  (s, v) =>
    s.pattern !== undefined && !(typeof v === 'string' && matches(v, patternOf(s.pattern)))
      ? patternRule(s.pattern, v)
      : undefined,
  (s, v) =>
    s.maxLength !== undefined && !(typeof v === 'string' && maxLength(v, s.maxLength))
      ? `must be shorter than or equal to ${s.maxLength} characters`
      : undefined,
  (s, v) =>
    s.minLength !== undefined && !(typeof v === 'string' && minLength(v, s.minLength))
      ? `must be longer than or equal to ${s.minLength} characters`
      : undefined,
  (s, v) => (s.format !== undefined && !formatRule(s.format).holds(v) ? formatRule(s.format).reason : undefined),
  (s, v) =>
    s.enum !== undefined && !isIn(v, s.enum as unknown[])
      ? `must be one of the following values: ${s.enum.join(', ')}`
      : undefined,
  (s, v) => (s.maximum !== undefined && !max(v, s.maximum) ? `must not be greater than ${s.maximum}` : undefined),
  (s, v) => (s.minimum !== undefined && !min(v, s.minimum) ? `must not be less than ${s.minimum}` : undefined),
  (s, v) =>
    s.maxItems !== undefined && !arrayMaxSize(v, s.maxItems)
      ? `must contain no more than ${s.maxItems} elements`
      : undefined,
  (s, v) =>
    s.minItems !== undefined && !arrayMinSize(v, s.minItems)
      ? `must contain at least ${s.minItems} elements`
      : undefined,
  (s, v) =>
    s.type !== undefined && TYPE_RULES[s.type] && !TYPE_RULES[s.type].holds(v) ? TYPE_RULES[s.type].reason : undefined,
];

const compiledPatterns = new Map<string, RegExp>();

function patternOf(source: string): RegExp {
  let pattern = compiledPatterns.get(source);
  if (!pattern) compiledPatterns.set(source, (pattern = new RegExp(source)));
  return pattern;
}

function patternRule(pattern: string, value: unknown): string {
  return PATTERN_RULES[pattern]?.(value) ?? `must match ${pattern} regular expression`;
}

function formatRule(format: string): { holds: (value: unknown) => boolean; reason: string } {
  const rule = FORMAT_RULES[format];
  if (!rule) throw new Error(`no rule for the format ${format}`);
  return rule;
}

/** A property's place in the path: `[3]` for an index (or a key of digits only), `.key` otherwise. */
function fieldOf(prefix: string, property: string): string {
  if (/^\d+$/.test(property)) return `${prefix}[${property}]`;
  return prefix ? `${prefix}.${property}` : property;
}

/** The first violation of `value` (the property `property` under `prefix`) against `schema`, if any. */
function firstViolationOfValue(
  schema: FieldSchema,
  value: unknown,
  prefix: string,
  property: string,
): Violation | undefined {
  const found = firstViolationBeneath(schema, value, prefix, property);
  return found && schema.reason !== undefined ? { field: fieldOf(prefix, property), reason: schema.reason } : found;
}

function firstViolationBeneath(
  schema: FieldSchema,
  value: unknown,
  prefix: string,
  property: string,
): Violation | undefined {
  for (const rule of RULE_ORDER) {
    const reason = rule(schema, value);
    if (reason !== undefined) return { field: fieldOf(prefix, property), reason };
  }
  const field = fieldOf(prefix, property);
  if (schema.items && Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = firstViolationOfValue(schema.items, item, field, String(index));
      if (found) return found;
    }
  }
  if (schema.properties && isObject(value)) return firstViolationOfObject(schema, value, field);
  return undefined;
}

/** The first violation in an object's own keys: unknown keys first, then each property in order. */
function firstViolationOfObject(schema: FieldSchema, value: object, prefix: string): Violation | undefined {
  const properties = schema.properties ?? {};
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(properties, key)) continue;
    if (schema.unknownKeyReason !== undefined)
      return { field: prefix ? `${prefix}.${key}` : key, reason: schema.unknownKeyReason };
    return { field: fieldOf(prefix, key), reason: `property ${key} should not exist` };
  }
  const record = value as Record<string, unknown>;
  for (const [property, propertySchema] of Object.entries(properties)) {
    const present = Object.hasOwn(record, property) && record[property] !== undefined;
    if (!present && !schema.required?.includes(property)) continue;
    const found = firstViolationOfValue(propertySchema, present ? record[property] : undefined, prefix, property);
    if (found) return found;
  }
  return undefined;
}

/** Keys that could reach an object's prototype if ever merged into one; never kept (docs/security.md). */
const PROTOTYPE_KEYS = ['__proto__', 'prototype', 'constructor'];

function holdsPrototypeKey(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (!Array.isArray(value) && PROTOTYPE_KEYS.some((key) => Object.hasOwn(value, key))) return true;
  return Object.values(value).some(holdsPrototypeKey);
}

/** Deletes those keys at every depth, as the route has always stored a free-form part holding them. */
function dropPrototypeKeys(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (!Array.isArray(value)) for (const key of PROTOTYPE_KEYS) delete (value as Record<string, unknown>)[key];
  for (const member of Object.values(value)) dropPrototypeKeys(member);
}

/**
 * Keys named like Object.prototype members (`toString`, `valueOf`, …) are refused everywhere but in
 * the free-form parts (the envelope, checked field by field against its own list, and a
 * verification's `result`), where the prototype keys are dropped instead, once the whole body has
 * been read. Answers whether a free-form part holds one.
 */
function refuseInheritedNames(value: unknown, path: string): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (path.endsWith('.envelope') || path.endsWith('.result')) return holdsPrototypeKey(value);
  let held = false;
  for (const [key, member] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    if (!Array.isArray(value) && (key in Object.prototype || key === 'prototype')) {
      throw new LedgerProblem('BAD_REQUEST', `${at} should not exist`, { field: at });
    }
    if (refuseInheritedNames(member, at)) held = true;
  }
  return held;
}

function refuse(found: Violation | undefined): void {
  if (found) throw new LedgerProblem('BAD_REQUEST', `${found.field} ${found.reason}`, { field: found.field });
}

/**
 * Another body of this API read as the submit body is: names inherited from Object.prototype
 * refused, then its shape against `schema`, the first violation a 400 naming the field.
 */
export function readAgainstSchema(schema: FieldSchema, body: object): void {
  if (refuseInheritedNames(body, '')) dropPrototypeKeys(body);
  refuse(firstViolationOfObject(schema, body, ''));
}

/** A bounded integer field, refused in the words the API uses for one: `must be an integer from <min> to <max>`. */
export const integerSchema = (minimum: number, maximum: number): FieldSchema => ({
  type: 'integer',
  minimum,
  maximum,
  reason: `must be an integer from ${minimum} to ${maximum}`,
});

/**
 * A body whose fields are taken out one by one (never merged into another object), read against
 * `schema` alone: its first violation a 400 naming the field.
 */
export function readFieldsAgainstSchema(schema: FieldSchema, body: object): void {
  refuse(firstViolationOfObject(schema, body, ''));
}

/** A fact's data against its type's schema in SUBMITTED_FACTS, its violations named under `prefix`. */
export function readFactData(type: SubmittedFactType, data: object, prefix: string): void {
  refuse(firstViolationOfObject(SUBMITTED_FACTS[type].data as FieldSchema, data, prefix));
}

interface ReadBody {
  expected_revision?: number;
  events: Array<{ event_id: string; type: SubmittedFactType; data: Record<string, unknown> }>;
}

/**
 * The submit body, read against its one definition (packages/core/src/facts): its outer shape and
 * each event's id, type and data object first, then each event's data by its type, each refusal a
 * 400 BAD_REQUEST naming the field (docs/contract.md §9). What is stored is what was sent.
 */
export function readSubmitBody(body: unknown, maxEventsPerSubmit: number): SubmitRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object', { field: 'body' });
  }
  if (refuseInheritedNames(body, '')) dropPrototypeKeys(body);
  const submitted = (body as { events?: unknown }).events;
  if (Array.isArray(submitted)) {
    submitted.forEach((event, index) => {
      if (event === null || typeof event !== 'object' || Array.isArray(event)) {
        throw new LedgerProblem('BAD_REQUEST', `events[${index}] must be an object`, { field: `events[${index}]` });
      }
    });
  }
  refuse(firstViolationOfObject(SUBMIT_BODY_SCHEMA as FieldSchema, body, ''));
  const checked = body as ReadBody;
  if (checked.events.length > maxEventsPerSubmit) {
    throw new LedgerProblem('BAD_REQUEST', `at most ${maxEventsPerSubmit} events per submit`, {
      field: 'events',
    });
  }
  const ids = new Set<string>();
  const events = checked.events.map((event, index) => {
    // UUIDs compare case-insensitively; the ledger stores them lower-case.
    const eventId = event.event_id.toLowerCase();
    if (ids.has(eventId)) {
      throw new LedgerProblem('BAD_REQUEST', 'an event_id appears twice in one submit', {
        field: `events[${index}].event_id`,
      });
    }
    ids.add(eventId);
    readFactData(event.type, event.data, `events[${index}].data`);
    return { event_id: eventId, type: event.type, data: event.data as SubmitRequest['events'][number]['data'] };
  });
  return {
    ...(checked.expected_revision === undefined ? {} : { expected_revision: checked.expected_revision }),
    events,
  };
}
