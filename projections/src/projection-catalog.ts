import { evidenceTrailProjection } from './evidence-trail/evidence-trail.projection';
import type { AnyProjection } from './projection';
import { runSummaryProjection } from './run-summary/run-summary.projection';
import { stepStateProjection } from './step-state/step-state.projection';
import { trustMetricsProjection } from './trust-metrics/trust-metrics.projection';

/** Every projection the engine runs; the order is the order their documents are written in a batch. */
export const LEDGER_PROJECTIONS: readonly AnyProjection[] = [
  stepStateProjection,
  evidenceTrailProjection,
  runSummaryProjection,
  trustMetricsProjection,
];
