/**
 * `@recovery-ledger/core`: the pure core (docs/architecture.md), named here on purpose; what is not
 * exported stays inside the package. A runtime that needs only the envelope rules imports
 * `@recovery-ledger/core/envelope`, which loads no decider.
 */

// The decider: a step's state folded from its events, and what a submitted fact does to it.
export {
  TRANSITION_REASONS,
  attemptsRemaining,
  decide,
  directiveFor,
  type Command,
  type Decision,
  type RefusalCode,
  type Refused,
  type WindowClock,
} from './domain/decide';
export {
  FOLD_VERSION,
  evolve,
  fold,
  initialState,
  isPlanned,
  mayHaveReachedProvider,
  type EnvelopeSummary,
  type PlannedStep,
  type StepState,
  type SuccessRecord,
  type UnplannedStep,
} from './domain/step-state';
export { NO_ATTEMPTS, countDispatch, type AttemptCounts } from './domain/attempts';
export {
  RETRY_JITTER_MAX_MS,
  RETRY_JITTER_MIN_MS,
  dueWork,
  retryJitterMs,
  type DueInput,
  type WorkKind,
} from './domain/work-due';

// The events: the facts a caller submits, the ones the ledger derives, and their vocabularies.
export {
  APPROVAL_DECISIONS,
  DEFAULT_POLICY,
  DERIVED_EVENT_TYPES,
  DIRECTIVE_ACTIONS,
  EVENT_SCHEMA_VERSION,
  LEDGER_EVENT_TYPES,
  MANUAL_OUTCOMES,
  MAX_CALL_WINDOW_MS,
  MAX_REOPEN_ATTEMPTS,
  OPERATOR_FACT_TYPES,
  SIDE_EFFECTS,
  STEP_STATUSES,
  STEP_VIEW_STATUSES,
  SUBMITTED_FACT_TYPES,
  TERMINAL_STATUSES,
  VERIFICATION_OUTCOMES,
  dispatchTimeoutMs,
  isOperatorFactType,
  isTerminalStatus,
  type ApprovalDecision,
  type ApprovalRecordedData,
  type AttemptDispatchedData,
  type DerivedEvent,
  type Directive,
  type DirectiveAction,
  type DispatchRefusedData,
  type EnvelopeRecordedData,
  type EscalationAcknowledgedData,
  type LateOutcomeRecordedData,
  type LedgerEvent,
  type LedgerEventType,
  type ManualOutcome,
  type OperatorFact,
  type OperatorFactType,
  type OutcomeVerifiedManuallyData,
  type RecordedEvent,
  type SideEffect,
  type StepCancelledData,
  type StepPlannedData,
  type StepPolicy,
  type StepReopenedData,
  type StepStatus,
  type StepViewStatus,
  type SubmittedFact,
  type SubmittedFactType,
  type TransitionRecordedData,
  type VerificationOutcome,
  type VerificationRecordedData,
} from './domain/events';
export {
  EventShapeError,
  decodeRecordedEvent,
  encodeLedgerEvent,
  eventShapeProblem,
  readLedgerEvent,
  type StoredShape,
} from './domain/event-codec';
export { CLIENT_EVENT_ID_PREFIX, IDENTIFIER_PATTERN } from './domain/identifier-grammar';

// Each submitted fact's one home: its data's schema, who records it, what it notifies, its replay line.
export {
  EVENT_ID_SCHEMA,
  EXPECTED_REVISION_SCHEMA,
  MAX_EVENTS_IN_BODY,
  SUBMITTED_FACTS,
  SUBMIT_BODY_SCHEMA,
  isSubmittedFactType,
  type FactDefinition,
  type FactNotification,
  type FactRecorder,
} from './facts/submitted-facts';
export { STEP_POLICY_SCHEMA } from './facts/step-planned';
export { MAX_OPERATIONS_PER_REQUEST, OPERATOR_FACTS_BODY_SCHEMA } from './facts/operator-facts-request';
export type { FromSchema } from './facts/from-schema';

// The HTTP contract's shapes (docs/contract.md §9), shared by the server and the client.
export {
  SUBMIT_RESULT_STATUSES,
  type EventView,
  type LeaseEvidence,
  type LeaseView,
  type OperationEvents,
  type OperationProblem,
  type OperatorFactOutcome,
  type OperatorFactsAnswer,
  type OperatorFactsRequest,
  type StepView,
  type SubmitAnswer,
  type SubmitCommand,
  type SubmitContext,
  type SubmitRequest,
  type SubmitResult,
  type SubmittedEvent,
  type WorkAnswer,
  type WorkItem,
  type WorkLease,
} from './contract/ledger-api.types';

// The one registry of stable codes (docs/contract.md §9), and the refusal that carries one.
export {
  ERROR_REGISTRY,
  errorDefinition,
  isErrorCode,
  type ErrorCode,
  type ErrorDefinition,
} from './errors/error-registry';
export { LedgerProblem, type LedgerProblemExtras } from './errors/ledger-problem';

// The tool envelope and canonical JSON (also `@recovery-ledger/core/envelope`).
export * from './envelope';

// Pure helpers.
export { isJsonObject, isJsonValue, type JsonObject, type JsonValue } from './shared/json';
export { isRfc3339Instant } from './shared/rfc3339';
