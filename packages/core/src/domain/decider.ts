/** The domain's public face: decide, evolve, fold and the state they share. */
export { decide, attemptsRemaining, directiveFor, TRANSITION_REASONS } from './decide';
export type { Command, Decision, Refused, RefusalCode, WindowClock } from './decide';
export { evolve, fold, FOLD_VERSION, initialState, isPlanned } from './step-state';
export type { StepState, PlannedStep } from './step-state';
