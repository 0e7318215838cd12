import {
  COMMIT_STATES,
  DEFAULT_ENVELOPE_LIMITS,
  ERROR_CATEGORIES,
  NEXT_ACTIONS,
  RETRY_DIRECTIVES,
  type EnvelopeLimits,
} from './envelope.types';
import { DIRECTIVE_ACTIONS } from '../events';
import { ISO_INSTANT_PATTERN, MAX_ATTEMPTS_REMAINING, STABLE_CODE_PATTERN } from './validate-envelope';

/**
 * The envelope's JSON Schema (draft 2020-12), generated from the same vocabularies and limits the
 * edge validation uses, so runtimes in any language validate exactly what the ledger accepts for a
 * write. Committed as schema/envelope.schema.json; a test fails when the two drift.
 */
export function envelopeJsonSchema(limits: EnvelopeLimits = DEFAULT_ENVELOPE_LIMITS): Record<string, unknown> {
  const instant = { type: 'string', format: 'date-time', pattern: ISO_INSTANT_PATTERN.source };
  const message = { type: 'string', maxLength: limits.maxMessageLength };
  const operationRef = { type: 'string', minLength: 1, maxLength: limits.maxOperationRefLength };
  const detailValue = {
    oneOf: [{ type: 'string', maxLength: limits.maxSafeDetailValueLength }, { type: 'number' }, { type: 'boolean' }],
  };
  const toolError = {
    type: 'object',
    additionalProperties: false,
    required: [
      'ok',
      'code',
      'category',
      'commit_state',
      'retry',
      'next_action',
      'operation_ref',
      'safe_details',
      'agent_message',
      'user_message',
    ],
    properties: {
      ok: { const: false },
      code: { type: 'string', maxLength: limits.maxCodeLength, pattern: STABLE_CODE_PATTERN.source },
      category: { enum: [...ERROR_CATEGORIES] },
      commit_state: { enum: COMMIT_STATES.filter((state) => state !== 'committed') },
      retry: {
        type: 'object',
        additionalProperties: false,
        required: ['directive', 'max_attempts_remaining'],
        properties: {
          directive: { enum: [...RETRY_DIRECTIVES] },
          not_before: instant,
          max_attempts_remaining: { type: 'integer', minimum: 0, maximum: MAX_ATTEMPTS_REMAINING },
        },
      },
      next_action: { enum: [...NEXT_ACTIONS] },
      operation_ref: operationRef,
      safe_details: {
        type: 'object',
        maxProperties: limits.maxSafeDetails,
        propertyNames: { enum: [...limits.safeDetailKeys] },
        additionalProperties: detailValue,
      },
      agent_message: message,
      user_message: message,
    },
    allOf: [
      {
        if: { properties: { commit_state: { const: 'unknown' } }, required: ['commit_state'] },
        then: {
          properties: {
            retry: { properties: { directive: { const: 'never' } } },
            next_action: { const: 'verify_operation' },
          },
        },
      },
      {
        if: { properties: { next_action: { const: 'wait_and_retry' } }, required: ['next_action'] },
        then: {
          properties: { retry: { required: ['not_before'], properties: { directive: { const: 'after_delay' } } } },
        },
      },
      {
        if: { properties: { next_action: { const: 'correct_input' } }, required: ['next_action'] },
        then: {
          properties: {
            commit_state: { const: 'not_committed' },
            retry: { properties: { directive: { const: 'after_input_fix' } } },
          },
        },
      },
    ],
  };
  const toolSuccess = {
    type: 'object',
    additionalProperties: false,
    required: ['ok', 'operation_ref', 'commit_state', 'result', 'verification'],
    properties: {
      ok: { const: true },
      operation_ref: operationRef,
      commit_state: { const: 'committed' },
      result: {},
      verification: {
        type: 'object',
        additionalProperties: false,
        required: ['checked_at'],
        properties: { checked_at: instant, evidence_ref: { type: 'string', maxLength: limits.maxOperationRefLength } },
      },
    },
  };
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'urn:recovery-ledger:schema:tool-envelope:v1',
    title: 'Tool result envelope',
    description:
      'What a tool that can change the world returns. The ledger also checks that operation_ref is the operation the envelope is recorded on.',
    oneOf: [{ $ref: '#/$defs/ToolSuccess' }, { $ref: '#/$defs/ToolError' }],
    $defs: {
      ToolSuccess: toolSuccess,
      ToolError: toolError,
      // Not an envelope: what the ledger answers back, published beside it for the same runtimes.
      LedgerDirective: {
        description:
          "What the ledger tells the runtime to do next: the envelope's next_action vocabulary, plus dispatch (an attempt may run), await_outcome (an attempt is in flight: record its envelope or verify it, never dispatch) and none (terminal).",
        type: 'object',
        required: ['next_action', 'attempts_remaining'],
        properties: {
          next_action: { enum: [...DIRECTIVE_ACTIONS] },
          not_before: instant,
          attempts_remaining: { type: 'integer', minimum: 0 },
        },
      },
    },
  };
}
