/** Capped exponential backoff for re-subscribing after a dropped subscription. */
export interface BackoffPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
  /** Injected by tests; Math.random otherwise. */
  random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialDelayMs: 100, maxDelayMs: 5000 };

/**
 * Delay before attempt `attempt` (1-based): the ceiling doubles per attempt up to maxDelayMs, and
 * the delay is drawn from the upper half of it ("equal jitter"), so delays keep growing while many
 * service instances that lost the same node do not all come back in the same millisecond.
 */
export function reconnectDelay(attempt: number, policy: BackoffPolicy): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, attempt - 1));
  const random = policy.random ?? Math.random;
  return Math.round(Math.max(policy.initialDelayMs, ceiling / 2 + (random() * ceiling) / 2));
}
