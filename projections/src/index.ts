/**
 * The read models (docs/architecture.md): each one's fold, stored shape and queries side by side,
 * one folder per read model, over the core's facts. What the server, the CLI and the tools use is
 * named here; the rest stays inside the package.
 */
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

export { type StepStateDoc, evolveStepState, stepDueMs, stepStateProjection } from './step-state/step-state.projection';
export {
  type TriageCounts,
  type TriageItem,
  type TriageKind,
  DEFAULT_TRIAGE_THRESHOLDS,
  ON_REQUEST_KINDS,
  TRIAGE_KINDS,
  compareTriage,
  countTriage,
  triageItemOf,
} from './step-state/triage';

export { type RunStep, type RunSummaryDoc, runSummaryProjection } from './run-summary/run-summary.projection';

export {
  type EvidenceReport,
  type EvidenceTrailDoc,
  evidenceReport,
  evidenceTrailProjection,
  evolveEvidenceTrail,
  sealEvidenceTrail,
} from './evidence-trail/evidence-trail.projection';

export {
  type TrustCounters,
  type TrustMetricsDoc,
  type TrustReport,
  trustMetricsProjection,
  trustReport,
} from './trust-metrics/trust-metrics.projection';
export { percentile } from './trust-metrics/duration-histogram';
