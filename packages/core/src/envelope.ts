/**
 * `@recovery-ledger/core/envelope`: what a runtime needs to build, check and hash what it records
 * (docs/contract.md §2), without the decider: the tool envelope's types, its JSON Schema, its
 * validation and redaction, and the canonical JSON an input hash is taken over. The client bundles
 * this entry alone (packages/client/tsup.config.ts); everything here is also in the package's index.
 */
export {
  COMMIT_STATES,
  DEFAULT_ENVELOPE_LIMITS,
  DEFAULT_SAFE_DETAIL_KEYS,
  ERROR_CATEGORIES,
  NEXT_ACTIONS,
  RETRY_DIRECTIVES,
  type CommitState,
  type EnvelopeLimits,
  type ErrorCategory,
  type NextAction,
  type ReadToolError,
  type RetryAdvice,
  type RetryDirective,
  type SafeDetailValue,
  type ToolEnvelope,
  type ToolError,
  type ToolSuccess,
} from './domain/envelope/envelope.types';
export { envelopeJsonSchema } from './domain/envelope/envelope.schema';
export {
  ISO_INSTANT_PATTERN,
  MAX_ATTEMPTS_REMAINING,
  STABLE_CODE_PATTERN,
  isIsoInstant,
  validateEnvelope,
  type EnvelopeContext,
  type EnvelopeValidation,
} from './domain/envelope/validate-envelope';
export {
  containsSecret,
  isCardNumber,
  isSecretKeyName,
  passesLuhn,
  redactDeep,
  redactText,
  type DetectedSecret,
  type Redaction,
  type RedactionOptions,
  type SecretDetector,
  type SecretKind,
} from './domain/envelope/redaction';
export { canonicalJson } from './shared/canonical-json';
