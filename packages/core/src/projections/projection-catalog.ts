import { evidenceTrailProjection } from './evidence-trail.projection';
import type { AnyProjection } from './projection';
import { runSummaryProjection } from './run-summary.projection';
import { stepStateProjection } from './step-state.projection';
import { trustMetricsProjection } from './trust-metrics.projection';

/** Every projection the engine runs; the order is the order their documents are written in a batch. */
export const LEDGER_PROJECTIONS: readonly AnyProjection[] = [
  stepStateProjection,
  evidenceTrailProjection,
  runSummaryProjection,
  trustMetricsProjection,
];
