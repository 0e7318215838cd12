/**
 * The read models (docs/architecture.md): each one's fold over the core's facts, its stored shape
 * and its queries side by side, one folder per read model. What the server, the CLI and the tools
 * use is named here; the rest stays inside the package.
 */

// What every read model shares: the projection's shape, the catalog, paging, the reader's port.
export {
  type AnyProjection,
  type ColumnType,
  type IndexValue,
  type ProjectedEvent,
  type Projection,
  instantMs,
  scopedKey,
} from './projection';
export { LEDGER_PROJECTIONS } from './projection-catalog';
export { decodeCursor, encodeCursor, pageOf } from './page-cursor';
export {
  type Condition,
  type DocRow,
  type QueryScope,
  type ReadModelReader,
  type ReadPosition,
  type SelectOptions,
} from './read-model';

// step_state: one document per operation, and the triage queue judged from it.
export { type StepStateDoc, evolveStepState, stepDueMs, stepStateProjection } from './step-state/step-state.projection';
export {
  type TriageCounts,
  type TriageItem,
  type TriageKind,
  type TriageWaitingItem,
  DEFAULT_TRIAGE_THRESHOLDS,
  ON_REQUEST_KINDS,
  TRIAGE_KINDS,
  compareTriage,
  countTriage,
  triageItemOf,
  waitingItemOf,
} from './step-state/triage';
export {
  type HeldRefs,
  type RecoveryAnswer,
  type RecoveryItem,
  type RecoveryQuery,
  type StepListQuery,
  type TriageAnswer,
  type TriageQuery,
  type TrustFlag,
  RECOVERY_STATUSES,
  TRUST_FLAGS,
  stepList,
  triageOf,
} from './step-state/step-state.queries';

// run_summary: one document per run.
export { type RunStep, type RunSummaryDoc, runSummaryProjection } from './run-summary/run-summary.projection';
export {
  type RunAnswer,
  type RunListAnswer,
  type RunListItem,
  type RunListQuery,
  type RunQuery,
  runList,
  runOf,
} from './run-summary/run-summary.queries';

// evidence_trail: one document per operation, every fact it recorded.
export {
  type EvidenceReport,
  type EvidenceTrailDoc,
  evidenceReport,
  evidenceTrailProjection,
  evolveEvidenceTrail,
  sealEvidenceTrail,
} from './evidence-trail/evidence-trail.projection';
export { type EvidenceAnswer, type EvidenceQuery, evidenceOf } from './evidence-trail/evidence-trail.queries';

// trust_metrics: one document per tool.
export {
  type TrustCounters,
  type TrustMetricsDoc,
  type TrustReport,
  trustMetricsProjection,
  trustReport,
} from './trust-metrics/trust-metrics.projection';
export { percentile } from './trust-metrics/duration-histogram';
export { type TrustAnswer, type TrustQuery, trustDocs, trustOf } from './trust-metrics/trust-metrics.queries';
