/**
 * The ledger's projections with step_state at its next version, as a deploy of new projection code
 * brings: the same columns, and every document it writes marked `next_version`, so a read tells the
 * old version's rows from the new one's.
 */
import { LEDGER_PROJECTIONS, stepStateProjection, type AnyProjection } from '@recovery-ledger/projections';

export const raisedStepState: AnyProjection = {
  ...stepStateProjection,
  version: stepStateProjection.version + 1,
  evolve(doc, event) {
    const next = stepStateProjection.evolve(doc, event);
    // Unchanged for an event already applied, as every fold must be (projections/src/projection.ts).
    return next === doc ? doc : { ...next, next_version: true };
  },
};

export const RAISED_PROJECTIONS: readonly AnyProjection[] = LEDGER_PROJECTIONS.map((projection) =>
  projection.name === raisedStepState.name ? raisedStepState : projection,
);
