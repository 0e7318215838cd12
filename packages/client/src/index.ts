/**
 * The runtime SDK: a typed client for the ledger's HTTP API, the contract's executeWrite state machine,
 * recover() for restarted workers, and the normalizers that turn what providers return into
 * envelopes. Nothing here loads NestJS or the server: a runtime imports it on its own.
 */
export { LedgerClient, operationPath } from './ledger-client';
export type {
  LedgerClientOptions,
  ProjectionReadOptions,
  RecoveryQuery,
  RequestOptions,
  RunQuery,
  SingleFactOptions,
  StartStep,
  SubmitOptions,
  TrustQuery,
  WorkQuery,
} from './ledger-client';
export {
  LedgerAuthError,
  LedgerError,
  LedgerInvalidRequest,
  LedgerNotFound,
  LedgerRefusal,
  LedgerUnavailable,
  isLedgerRefusal,
  ledgerErrorFromAnswer,
} from './ledger-errors';
export type { ClientErrorCode, LedgerErrorCode, LedgerErrorInit } from './ledger-errors';
export type * from './ledger-api.types';

export {
  executeWrite,
  inputHash,
  runAttempt,
  verify,
  OutcomeNotRecordedError,
  callMarginMs,
  callWindowOf,
  CALL_MARGIN_FRACTION,
  MIN_CALL_MARGIN_MS,
  MAX_CALL_WINDOW_MS,
} from './execute-write';
export { LedgerWorker } from './ledger-worker';
export type { LedgerWorkerOptions, WorkerEvent, WorkerReport, WorkerTool } from './ledger-worker';
export type {
  AttemptToRun,
  ExecuteOptions,
  LedgerApi,
  Lookup,
  LookupResult,
  ToolCall,
  ToolCallContext,
  VerifyOutcome,
  VerifyStep,
  WriteOutcome,
  WriteOutcomeKind,
  WriteStep,
} from './execute-write';
export { recover } from './recover';
export type { RecoverOptions, RecoveryEntry, RecoveryEntryResult, RecoveryReport } from './recover';
export { callHttpTool } from './http-tool';
export { CALL_DEADLINE_HEADER } from './call-window';
export type { CallWindow } from './call-window';
export type { HttpToolOptions, HttpToolRequest } from './http-tool';

export {
  callWindowPassed,
  correctInput,
  escalate,
  uncertainOutcome,
  waitAndRetry,
  NORMALIZED_CODE_FACTS,
  DEFAULT_RETRY_DELAY_MS,
  DEFAULT_INPUT_FIX_ATTEMPTS,
  DEFAULT_RETRY_ATTEMPTS,
} from './normalizers/envelope-builders';
export type { NormalizeContext, NormalizedCode, SideEffect } from './normalizers/envelope-builders';
export { normalizeHttpResponse, bodySaysFailure } from './normalizers/http-response.normalizer';
export type { HttpNormalizeOptions, HttpResponseLike } from './normalizers/http-response.normalizer';
export { normalizeNetworkError, classifyNetworkError } from './normalizers/network-error.normalizer';
export type {
  NetworkErrorClassification,
  NetworkErrorOptions,
  NetworkFailureKind,
  SendPhase,
} from './normalizers/network-error.normalizer';
export { normalizeMcpToolResult } from './normalizers/mcp-result.normalizer';
export type { McpNormalizeOptions } from './normalizers/mcp-result.normalizer';
export { retryAfterMs, headerValue } from './normalizers/retry-after';
export { inputFieldsOf } from './normalizers/input-fields';
export { SAFE_TOKEN_PATTERN, safeToken, upstreamError } from './normalizers/upstream-text';

// The envelope contract, from the one definition the ledger validates with.
export { envelopeJsonSchema } from '@recovery-ledger/core/envelope';
export { validateEnvelope } from '@recovery-ledger/core/envelope';
export type { EnvelopeContext, EnvelopeValidation } from '@recovery-ledger/core/envelope';
export {
  COMMIT_STATES,
  ERROR_CATEGORIES,
  NEXT_ACTIONS,
  RETRY_DIRECTIVES,
  DEFAULT_ENVELOPE_LIMITS,
} from '@recovery-ledger/core/envelope';
export type {
  CommitState,
  EnvelopeLimits,
  ErrorCategory,
  NextAction,
  RetryDirective,
  ToolEnvelope,
  ToolError,
  ToolSuccess,
} from '@recovery-ledger/core/envelope';

// One call of a write tool through the ledger, for any host (the MCP gateway, agent frameworks).
export { callLedgeredTool, approvalGranted, operationRefFor, MAX_OPERATION_REF_LENGTH } from './ledgered-tool';
export type {
  LedgeredToolLedger,
  LedgeredToolPolicy,
  LedgeredToolRequest,
  LedgeredToolResult,
  LedgeredToolStatus,
  OperationRefParts,
} from './ledgered-tool';
export {
  approvalGateEnvelope,
  checked,
  codeFact,
  envelopeForState,
  forStepTool,
  ledgerUnauthorizedEnvelope,
  ledgerUnavailableEnvelope,
  modelText,
  notRecordedEnvelope,
  refReusedEnvelope,
  successEnvelope,
} from './tool-answer';
export type { AnswerContext, ModelTextOptions } from './tool-answer';
