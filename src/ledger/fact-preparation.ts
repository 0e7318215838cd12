import {
  type AttemptDispatchedData,
  canonicalJson,
  type EnvelopeLimits,
  isPlanned,
  type JsonValue,
  LedgerProblem,
  redactDeep,
  type SecretDetector,
  type StepPolicy,
  type StepState,
  SUBMITTED_FACTS,
  type SubmittedEvent,
  type SubmittedFact,
  type SubmittedFactType,
  validateEnvelope,
} from '@recovery-ledger/core';
import { sha256Hex } from './event-ids';

export interface PreparationSettings {
  envelopeLimits: EnvelopeLimits;
  defaultPolicy: StepPolicy;
}

/** A step's input is stored for workers to call the tool with, so it is bounded and checked against its hash. */
export const MAX_STEP_INPUT_BYTES = 16 * 1024;

/**
 * The input a plan carries for the work feed, or a dispatch for its approver (a corrected input).
 * It must hash (SHA-256 of its canonical JSON, as the SDK's inputHash) to the fact's input_hash, so
 * the gate's input check means the same input. It is refused, not redacted, when the one detector
 * (`detect`, with the shapes and names of redaction) flags any of its strings, keys or card numbers:
 * a redacted input would no longer hash to input_hash and would change what the tool is called
 * with, and a stored one would keep the secret in the log and hand it to every worker
 * (docs/security.md, "Secrets").
 */
function checkedInput(input: unknown, hash: string, field: string, detect?: SecretDetector): JsonValue {
  let canonical: string;
  try {
    canonical = canonicalJson(input);
  } catch {
    throw new LedgerProblem('BAD_REQUEST', 'input must be JSON', { field });
  }
  if (Buffer.byteLength(canonical) > MAX_STEP_INPUT_BYTES) {
    throw new LedgerProblem('BAD_REQUEST', `input may be at most ${MAX_STEP_INPUT_BYTES} bytes of JSON`, { field });
  }
  if (sha256Hex(canonical) !== hash) {
    throw new LedgerProblem('BAD_REQUEST', 'input_hash is not the SHA-256 of the canonical input', {
      field: field.replace(/input$/, 'input_hash'),
    });
  }
  if (redactDeep(input, '', { detect }).redactions.length > 0) {
    throw new LedgerProblem(
      'BAD_REQUEST',
      'input holds what looks like a secret; tools take credentials from their own configuration',
      { field },
    );
  }
  return JSON.parse(canonical) as JsonValue;
}

/** A fact's data schema, as far as preparing it reads it. */
interface DataSchema {
  properties: Record<string, { type?: string; pattern?: string; enum?: unknown; format?: string }>;
}

/**
 * Free text a person or a tool wrote (a string with no pattern, vocabulary or format: a reason, a
 * note, an approver's name) is redacted before it is stored (docs/security.md, "Secrets").
 */
const isFreeText = (field: DataSchema['properties'][string]): boolean =>
  field.type === 'string' && field.pattern === undefined && field.enum === undefined && field.format === undefined;

/**
 * How most facts are stored: the fields their schema defines, in the schema's order, each free-text
 * one redacted in place (their data keeps no list of redactions: its shape predates one, and a
 * redacted field shows its marker).
 */
function storedAsDefined(type: SubmittedFactType, data: Record<string, unknown>, detect?: SecretDetector) {
  const { properties } = SUBMITTED_FACTS[type].data as DataSchema;
  const present = Object.keys(properties).filter((name) => data[name] !== undefined);
  const freeText = Object.fromEntries(
    present.filter((name) => isFreeText(properties[name])).map((name) => [name, data[name]]),
  );
  const { value: redacted } = redactDeep(freeText, '', { detect });
  return {
    type,
    data: Object.fromEntries(present.map((name) => [name, redacted[name] ?? data[name]])),
  } as SubmittedFact;
}

/**
 * Turns a submitted event (shape checked at the edge) into a domain fact: the plan's policy filled
 * in with the defaults of the day (so a replay never depends on configuration), the envelope checked
 * against the step it is recorded on, and anything free-form redacted before it can be stored.
 * A fact with nothing more to it is stored as its schema defines it (`storedAsDefined`).
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
      const input =
        data.input === undefined
          ? undefined
          : checkedInput(data.input, data.input_hash, `${fieldPrefix}.data.input`, detect);
      return {
        type: 'StepPlanned',
        data: {
          run_id: data.run_id,
          tool: data.tool,
          side_effect: data.side_effect,
          input_hash: data.input_hash,
          policy,
          ...(input === undefined ? {} : { input }),
        },
      };
    }
    case 'AttemptDispatched': {
      const { input, ...rest } = data;
      const stored = storedAsDefined(submitted.type, rest, detect);
      if (input === undefined) return stored;
      const checked = checkedInput(input, data.input_hash, `${fieldPrefix}.data.input`, detect);
      return { type: 'AttemptDispatched', data: { ...(stored.data as AttemptDispatchedData), input: checked } };
    }
    case 'EnvelopeRecorded': {
      // Before the plan there is no side effect to judge the envelope by: the decider refuses it.
      const sideEffect = isPlanned(state) ? state.definition.side_effect : 'write';
      const checked = validateEnvelope(data.envelope, { operationRef, sideEffect, detect }, settings.envelopeLimits);
      if (!checked.ok) {
        throw new LedgerProblem('ENVELOPE_INVALID', `envelope.${checked.field} ${checked.reason}`, {
          field: `${fieldPrefix}.data.envelope.${checked.field}`,
        });
      }
      return {
        type: 'EnvelopeRecorded',
        data: { attempt: data.attempt, envelope: checked.envelope, redactions: checked.redactions },
      };
    }
    case 'VerificationRecorded': {
      const { value, redactions } = redactDeep({ evidence_ref: data.evidence_ref, result: data.result }, '', {
        detect,
      });
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
    case 'OutcomeVerifiedManually':
      // A person's word that the write committed is evidence only with what they saw (§4.10).
      if (data.outcome === 'found_committed' && data.evidence_ref === undefined) {
        throw new LedgerProblem('BAD_REQUEST', 'found_committed needs the evidence_ref the person saw', {
          field: `${fieldPrefix}.data.evidence_ref`,
        });
      }
      return storedAsDefined(submitted.type, data, detect);
    default:
      return storedAsDefined(submitted.type, data, detect);
  }
}
