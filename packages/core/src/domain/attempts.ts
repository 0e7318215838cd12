/**
 * How a step counts its attempts, defined once: the decider's fold (`evolve`) and every projection
 * that shows attempts (step state, run summary, evidence trail) derive them with this, so they
 * cannot disagree about what `attempts_used` and `current_attempt` mean.
 */
export interface AttemptCounts {
  /** Dispatches the ledger granted. */
  attempts_used: number;
  /** The attempt last granted (0 before the first). */
  current_attempt: number;
}

export const NO_ATTEMPTS: AttemptCounts = { attempts_used: 0, current_attempt: 0 };

/** The counts after a granted dispatch of `attempt`: one more used, and it is the current one. */
export function countDispatch(before: AttemptCounts, attempt: number): AttemptCounts {
  return { attempts_used: before.attempts_used + 1, current_attempt: attempt };
}
