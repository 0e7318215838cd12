import {
  COMMIT_STATES,
  DEFAULT_ENVELOPE_LIMITS,
  ERROR_CATEGORIES,
  NEXT_ACTIONS,
  RETRY_DIRECTIVES,
  type EnvelopeLimits,
  type NextAction,
  type RetryDirective,
  type SafeDetailValue,
  type ToolEnvelope,
  type ToolError,
} from './envelope.types';
import { isRfc3339Instant } from '../../shared/rfc3339';
import { redactDeep, type Redaction, type SecretDetector } from './redaction';
import type { SideEffect } from '../events';

export interface EnvelopeContext {
  /** The operation the envelope is recorded on: the envelope must name the same one. */
  operationRef: string;
  sideEffect: SideEffect;
  /** What the service's detector found in the submit's strings (see redaction.ts). */
  detect?: SecretDetector;
}

export type EnvelopeValidation =
  { ok: true; envelope: ToolEnvelope; redactions: Redaction[] } | { ok: false; field: string; reason: string };

export const STABLE_CODE_PATTERN = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;
export const ISO_INSTANT_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
export const MAX_ATTEMPTS_REMAINING = 1000;

/** An RFC 3339 instant with its time zone, on a real calendar date (src/shared/rfc3339.ts). */
export function isIsoInstant(value: unknown): value is string {
  return isRfc3339Instant(value);
}

class EnvelopeViolation {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {}
}

const fail = (field: string, reason: string): never => {
  throw new EnvelopeViolation(field, reason);
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function onlyKeys(value: Record<string, unknown>, allowed: readonly string[], at: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) fail(at ? `${at}.${key}` : key, 'is not a field of the envelope');
  }
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], field: string): T {
  if (typeof value !== 'string' || !allowed.includes(value as T)) fail(field, `must be one of ${allowed.join(', ')}`);
  return value as T;
}

function boundedString(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') fail(field, 'must be a string');
  if ((value as string).length > max) fail(field, `must be at most ${max} characters`);
  return value as string;
}

function checkOperationRef(value: unknown, context: EnvelopeContext): string {
  // Compared as the path's ref is kept: Unicode NFC, so the same text in another normal form matches.
  if (typeof value !== 'string' || value.normalize('NFC') !== context.operationRef) {
    fail('operation_ref', 'must be the operation the envelope is recorded on');
  }
  return context.operationRef;
}

function checkSafeDetails(value: unknown, limits: EnvelopeLimits): Record<string, SafeDetailValue> {
  if (!isPlainObject(value)) return fail('safe_details', 'must be an object');
  const entries = Object.entries(value);
  if (entries.length > limits.maxSafeDetails) fail('safe_details', `must have at most ${limits.maxSafeDetails} keys`);
  for (const [key, detail] of entries) {
    const field = `safe_details.${key}`;
    if (!limits.safeDetailKeys.includes(key)) fail(field, 'is not an allowed detail key');
    if (typeof detail === 'string') boundedString(detail, field, limits.maxSafeDetailValueLength);
    else if (typeof detail === 'number') {
      if (!Number.isFinite(detail)) fail(field, 'must be a finite number');
    } else if (typeof detail !== 'boolean') fail(field, 'must be a string, number or boolean');
  }
  return value as Record<string, SafeDetailValue>;
}

function checkRetry(value: unknown, required: boolean): ToolError['retry'] {
  if (!isPlainObject(value)) return fail('retry', 'must be an object');
  onlyKeys(value, ['directive', 'not_before', 'max_attempts_remaining'], 'retry');
  const directive = oneOf(value.directive, RETRY_DIRECTIVES, 'retry.directive');
  const retry: ToolError['retry'] = { directive, max_attempts_remaining: 0 };
  if (value.not_before !== undefined) {
    if (!isIsoInstant(value.not_before))
      fail('retry.not_before', 'must be an RFC 3339 instant with a time zone, on a real date');
    retry.not_before = value.not_before as string;
  }
  const remaining = value.max_attempts_remaining;
  if (remaining === undefined && !required) return retry;
  if (!Number.isInteger(remaining) || (remaining as number) < 0 || (remaining as number) > MAX_ATTEMPTS_REMAINING) {
    fail('retry.max_attempts_remaining', `must be an integer from 0 to ${MAX_ATTEMPTS_REMAINING}`);
  }
  retry.max_attempts_remaining = remaining as number;
  return retry;
}

/** What a read-only tool's smaller form implies for the fields it may leave out. */
function impliedNextAction(directive: RetryDirective): NextAction {
  if (directive === 'after_delay') return 'wait_and_retry';
  if (directive === 'after_input_fix') return 'correct_input';
  return 'escalate';
}

const ERROR_FIELDS = [
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
] as const;

function checkError(input: Record<string, unknown>, context: EnvelopeContext, limits: EnvelopeLimits): ToolError {
  onlyKeys(input, ERROR_FIELDS, '');
  const full = context.sideEffect === 'write';
  if (full) {
    for (const field of ERROR_FIELDS) if (input[field] === undefined) fail(field, 'is required');
  }
  const code = boundedString(input.code, 'code', limits.maxCodeLength);
  if (!STABLE_CODE_PATTERN.test(code)) fail('code', 'must be UPPER_SNAKE_CASE');
  const retry = checkRetry(input.retry, full);
  const envelope: ToolError = {
    ok: false,
    code,
    category: input.category === undefined ? 'internal' : oneOf(input.category, ERROR_CATEGORIES, 'category'),
    commit_state:
      input.commit_state === undefined ? 'not_committed' : oneOf(input.commit_state, COMMIT_STATES, 'commit_state'),
    retry,
    next_action:
      input.next_action === undefined
        ? impliedNextAction(retry.directive)
        : oneOf(input.next_action, NEXT_ACTIONS, 'next_action'),
    operation_ref:
      input.operation_ref === undefined ? context.operationRef : checkOperationRef(input.operation_ref, context),
    safe_details: input.safe_details === undefined ? {} : checkSafeDetails(input.safe_details, limits),
    agent_message:
      input.agent_message === undefined
        ? ''
        : boundedString(input.agent_message, 'agent_message', limits.maxMessageLength),
    user_message:
      input.user_message === undefined
        ? ''
        : boundedString(input.user_message, 'user_message', limits.maxMessageLength),
  };
  checkConsistency(envelope, context);
  return envelope;
}

/** The contract's consistency rules; each names the field a runtime has to fix. */
function checkConsistency(envelope: ToolError, context: EnvelopeContext): void {
  const { commit_state, retry, next_action } = envelope;
  if (commit_state === 'committed') fail('commit_state', 'ok: false with committed is contradictory');
  if (commit_state === 'unknown' && context.sideEffect === 'write') {
    if (retry.directive !== 'never') fail('retry.directive', 'must be never when a write is unknown: verify first');
    if (next_action !== 'verify_operation') fail('next_action', 'must be verify_operation when a write is unknown');
  }
  if (next_action === 'wait_and_retry') {
    if (retry.directive !== 'after_delay') fail('retry.directive', 'must be after_delay with wait_and_retry');
    if (retry.not_before === undefined) fail('retry.not_before', 'is required with wait_and_retry');
  }
  if (next_action === 'correct_input') {
    if (commit_state !== 'not_committed') fail('commit_state', 'must be not_committed with correct_input');
    if (retry.directive !== 'after_input_fix') fail('retry.directive', 'must be after_input_fix with correct_input');
  }
}

function checkSuccess(input: Record<string, unknown>, context: EnvelopeContext, limits: EnvelopeLimits): ToolEnvelope {
  onlyKeys(input, ['ok', 'operation_ref', 'commit_state', 'result', 'verification'], '');
  checkOperationRef(input.operation_ref, context);
  if (input.commit_state !== 'committed') fail('commit_state', 'must be committed when ok is true');
  if (input.result === undefined) fail('result', 'is required');
  const verification = input.verification;
  if (!isPlainObject(verification)) return fail('verification', 'must be an object');
  onlyKeys(verification, ['checked_at', 'evidence_ref'], 'verification');
  if (!isIsoInstant(verification.checked_at))
    fail('verification.checked_at', 'must be an RFC 3339 instant with a time zone, on a real date');
  if (verification.evidence_ref !== undefined) {
    boundedString(verification.evidence_ref, 'verification.evidence_ref', limits.maxOperationRefLength);
  }
  return {
    ok: true,
    operation_ref: context.operationRef,
    commit_state: 'committed',
    result: input.result,
    verification: {
      checked_at: verification.checked_at as string,
      ...(verification.evidence_ref === undefined ? {} : { evidence_ref: verification.evidence_ref as string }),
    },
  };
}

/** Redacts what a tool wrote freely; the machine fields are vocabularies and cannot carry secrets. */
function redactEnvelope(
  envelope: ToolEnvelope,
  detect?: SecretDetector,
): { envelope: ToolEnvelope; redactions: Redaction[] } {
  if (envelope.ok) {
    const { value, redactions } = redactDeep({ result: envelope.result, verification: envelope.verification }, '', {
      detect,
    });
    return { envelope: { ...envelope, ...value }, redactions };
  }
  const { agent_message, user_message, safe_details } = envelope;
  const { value, redactions } = redactDeep({ agent_message, user_message, safe_details }, '', { detect });
  return { envelope: { ...envelope, ...value }, redactions };
}

/**
 * Validates a tool envelope at the edge (docs/contract.md §2) and returns it normalised and redacted. Nothing is
 * stored from an envelope that fails: the caller answers 422 ENVELOPE_INVALID naming `field`.
 */
export function validateEnvelope(
  input: unknown,
  context: EnvelopeContext,
  limits: EnvelopeLimits = DEFAULT_ENVELOPE_LIMITS,
): EnvelopeValidation {
  try {
    if (!isPlainObject(input)) return { ok: false, field: 'envelope', reason: 'must be an object' };
    if (typeof input.ok !== 'boolean') return { ok: false, field: 'ok', reason: 'must be true or false' };
    const envelope = input.ok ? checkSuccess(input, context, limits) : checkError(input, context, limits);
    return { ok: true, ...redactEnvelope(envelope, context.detect) };
  } catch (error) {
    if (error instanceof EnvelopeViolation) return { ok: false, field: error.field, reason: error.reason };
    throw error;
  }
}
