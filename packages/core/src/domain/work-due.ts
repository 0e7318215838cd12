import type { StepStatus } from './events';

/**
 * When a step is due on the work feed, and for what (docs/contract.md §4). Pure and deterministic:
 * the step-state projection indexes it, and the feed judges it again on the step's own stream
 * before it hands anything out. The dispatch gate stays the hard guarantee either way.
 *
 * - planned, retry_ready: due at once, to dispatch.
 * - retry_scheduled: due at not_before plus a jitter the ledger chooses, to dispatch.
 * - verifying: due at once, to verify by the same operation_ref.
 * - dispatched: due dispatch_timeout_ms after the dispatch, to verify (its worker is taken to
 *   have died; a live worker keeps its lease and the item is not handed out while it does).
 * - needs_input, awaiting_approval, succeeded, escalated: never (a person or the model acts).
 */
export type WorkKind = 'dispatch' | 'verify';

export interface DueInput {
  status: StepStatus | 'unplanned';
  operation_ref: string;
  /** Attempts granted so far: with the ref, what the jitter is derived from. */
  attempts_used: number;
  since_ms: number;
  not_before_ms?: number;
  dispatch_timeout_ms: number;
}

/**
 * The spread added to a scheduled retry, so a burst of steps rate-limited at one instant does not
 * retry at one instant: a tenth of the wait, at least RETRY_JITTER_MIN_MS and at most
 * RETRY_JITTER_MAX_MS, scaled by a fraction derived from the ref and attempt. Derived, not random,
 * so every instance and every replay agree on when a step is due.
 */
export const RETRY_JITTER_MIN_MS = 100;
export const RETRY_JITTER_MAX_MS = 5_000;

/** FNV-1a over the UTF-16 code units: small, stable, and well spread for short keys. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  // A final avalanche: FNV alone leaves near keys (step_1, step_2) close in their high bits.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b) >>> 0;
  hash ^= hash >>> 13;
  return hash >>> 0;
}

export function retryJitterMs(operationRef: string, attempt: number, waitMs: number): number {
  const window = Math.min(RETRY_JITTER_MAX_MS, Math.max(RETRY_JITTER_MIN_MS, Math.round(Math.max(0, waitMs) / 10)));
  const fraction = fnv1a(`${operationRef}#${attempt}`) / 0x1_0000_0000;
  return Math.floor(fraction * window);
}

/** What the step is due for and from when (epoch ms), or undefined when the feed never hands it out. */
export function dueWork(step: DueInput): { kind: WorkKind; due_ms: number } | undefined {
  switch (step.status) {
    case 'planned':
    case 'retry_ready':
      return { kind: 'dispatch', due_ms: step.since_ms };
    case 'retry_scheduled': {
      const notBefore = step.not_before_ms ?? step.since_ms;
      const jitter = retryJitterMs(step.operation_ref, step.attempts_used, notBefore - step.since_ms);
      return { kind: 'dispatch', due_ms: notBefore + jitter };
    }
    case 'verifying':
      return { kind: 'verify', due_ms: step.since_ms };
    case 'dispatched':
      return { kind: 'verify', due_ms: step.since_ms + step.dispatch_timeout_ms };
    default:
      return undefined;
  }
}
