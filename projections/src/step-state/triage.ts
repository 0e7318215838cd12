import { DEFAULT_POLICY } from '@recovery-ledger/core';
import type { StepStateDoc } from './step-state.projection';
import { instantMs } from '../projection';

/**
 * What needs a person now (docs/contract.md §5): a pure reading of the step state index at a given
 * instant. Escalated steps and steps awaiting approval need someone at once; an unknown outcome
 * needs someone once a lookup can settle it either way and none has (its plan's consistency window
 * after it began verifying, §4.5), and a dispatch once it has stayed in flight past its timeout.
 * Time is passed in, never read, so the same documents and instant always give the same queue.
 */
export type TriageKind =
  | 'possible_duplicate'
  | 'escalated'
  | 'awaiting_approval'
  | 'unknown_outcome'
  | 'dispatch_overdue'
  | 'retry_overdue'
  | 'input_awaited'
  | 'acknowledged';

export const TRIAGE_KINDS: readonly TriageKind[] = [
  'possible_duplicate',
  'escalated',
  'awaiting_approval',
  'unknown_outcome',
  'dispatch_overdue',
  'retry_overdue',
  'input_awaited',
  'acknowledged',
];

/**
 * An escalation an operator acknowledged (docs/contract.md §4.10) is still escalated, but someone
 * has it: it is listed only when asked for (`kind=acknowledged`), not in "Needs a person".
 */
export const ON_REQUEST_KINDS: readonly TriageKind[] = ['acknowledged'];

export interface TriageThresholds {
  /**
   * A step in `verifying` at least this long is an unknown outcome a person should resolve, when the
   * query names it or the step's plan names no consistency window (a document folded before it was
   * kept).
   */
  unknown_after_ms: number;
  /** The query named unknown_after_ms: it then applies to every step, over the plans' own windows. */
  unknown_after_asked?: boolean;
  /** A step in `dispatched` at least this long is overdue, when its plan names no timeout of its own. */
  dispatch_timeout_ms: number;
  /** The query named a dispatch timeout: it then applies to every step, over the plans' own. */
  dispatch_timeout_asked?: boolean;
  /**
   * A scheduled retry still waiting this long past its not_before is overdue: no worker took it
   * (the work feed hands it out at not_before plus a jitter of at most 5 s). The caller drops the
   * ones a worker's lease holds, which this pure reading cannot see.
   */
  retry_grace_ms: number;
  /** A step waiting for a corrected input at least this long: the model or its user went away. */
  input_after_ms: number;
}

/**
 * An unknown outcome by its plan's consistency window (the policy's default where a document has
 * none), 5 minutes in flight, a retry 1 minute past its time, an input awaited 30 minutes: defaults
 * a query may override (README.md, "Incident console").
 */
export const DEFAULT_TRIAGE_THRESHOLDS: TriageThresholds = {
  unknown_after_ms: DEFAULT_POLICY.consistency_window_ms,
  dispatch_timeout_ms: 5 * 60_000,
  retry_grace_ms: 60_000,
  input_after_ms: 30 * 60_000,
};

export interface TriageItem {
  kind: TriageKind;
  operation_ref: string;
  run_id: string;
  tool: string;
  status: string;
  /** The reason code of the transition that put the step where it is. */
  reason: string;
  since: string;
  /** How long the step has been in its status at the instant asked. */
  age_ms: number;
  /** For the timed kinds: the threshold it passed, and where it came from. */
  threshold_ms?: number;
  threshold_from?: 'policy' | 'query';
  attempt: number;
  attempts_used: number;
  revision: number;
  /** For `acknowledged`: who took it, for whom, when. */
  acknowledged?: { assignee: string; by: string; at: string; note?: string };
}

/** The step's own dispatch timeout, when its plan carried one. */
export function planDispatchTimeout(doc: StepStateDoc): number | undefined {
  const value = doc.dispatch_timeout_ms;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * How long a step verifies before it needs a person: from the instant it began verifying (its call's
 * end, or the late report that made its outcome unknown again, at or after the attempt's last reach),
 * its plan's consistency window, after which a lookup's not_found is conclusive (docs/contract.md
 * §4.5): until then no lookup, a person's included, can settle every answer, and a runtime that
 * verifies settles it at that instant at the latest. The query's unknown_after_ms, when named, instead.
 */
function unknownThreshold(doc: StepStateDoc, thresholds: TriageThresholds): { ms: number; from: 'policy' | 'query' } {
  const own = thresholds.unknown_after_asked ? undefined : doc.consistency_window_ms;
  return own === undefined ? { ms: thresholds.unknown_after_ms, from: 'query' } : { ms: own, from: 'policy' };
}

/** An unknown outcome that does not need a person yet, and when it will (docs/contract.md §5). */
export interface TriageWaitingItem {
  operation_ref: string;
  run_id: string;
  tool: string;
  reason: string;
  since: string;
  /** When it joins the queue as unknown_outcome, unless a lookup settles it first. */
  due_at: string;
  threshold_ms: number;
  threshold_from: 'policy' | 'query';
  revision: number;
}

/** The waiting unknown outcome a step is at `nowMs`: verifying, not yet past its threshold. */
export function waitingItemOf(
  doc: StepStateDoc,
  nowMs: number,
  thresholds: TriageThresholds,
): TriageWaitingItem | undefined {
  if (doc.status !== 'verifying' || (doc.possible_duplicates ?? 0) > 0) return undefined;
  const threshold = unknownThreshold(doc, thresholds);
  const dueMs = instantMs(doc.since) + threshold.ms;
  if (nowMs >= dueMs) return undefined;
  return {
    operation_ref: doc.operation_ref,
    run_id: doc.run_id,
    tool: doc.tool,
    reason: doc.reason,
    since: doc.since,
    due_at: new Date(dueMs).toISOString(),
    threshold_ms: threshold.ms,
    threshold_from: threshold.from,
    revision: doc.revision,
  };
}

/** The triage item a step is at `nowMs`, or undefined when it needs nobody. */
export function triageItemOf(doc: StepStateDoc, nowMs: number, thresholds: TriageThresholds): TriageItem | undefined {
  const ageMs = Math.max(0, nowMs - instantMs(doc.since));
  const base = {
    operation_ref: doc.operation_ref,
    run_id: doc.run_id,
    tool: doc.tool,
    status: doc.status,
    reason: doc.reason,
    since: doc.since,
    age_ms: ageMs,
    attempt: doc.current_attempt,
    attempts_used: doc.attempts_used,
    revision: doc.revision,
  };
  // A provider that may hold two writes needs a person whatever the step's status (docs/contract.md §4.9).
  if ((doc.possible_duplicates ?? 0) > 0) return { kind: 'possible_duplicate', ...base };
  switch (doc.status) {
    case 'escalated':
      return doc.acknowledged
        ? { kind: 'acknowledged', ...base, acknowledged: doc.acknowledged }
        : { kind: 'escalated', ...base };
    case 'awaiting_approval':
      return { kind: 'awaiting_approval', ...base };
    case 'verifying': {
      const threshold = unknownThreshold(doc, thresholds);
      return ageMs >= threshold.ms
        ? { kind: 'unknown_outcome', ...base, threshold_ms: threshold.ms, threshold_from: threshold.from }
        : undefined;
    }
    case 'dispatched': {
      // A responder asking "what has been in flight longer than X" gets exactly that; otherwise each
      // step is judged by its own plan's timeout (every plan has one: docs/work-feed.md).
      const own = thresholds.dispatch_timeout_asked ? undefined : planDispatchTimeout(doc);
      const timeout = own ?? thresholds.dispatch_timeout_ms;
      return ageMs >= timeout
        ? {
            kind: 'dispatch_overdue',
            ...base,
            threshold_ms: timeout,
            threshold_from: own === undefined ? 'query' : 'policy',
          }
        : undefined;
    }
    case 'retry_scheduled': {
      const notBefore = doc.not_before === undefined ? instantMs(doc.since) : instantMs(doc.not_before);
      return nowMs >= notBefore + thresholds.retry_grace_ms
        ? { kind: 'retry_overdue', ...base, threshold_ms: thresholds.retry_grace_ms, threshold_from: 'query' }
        : undefined;
    }
    case 'needs_input':
      return ageMs >= thresholds.input_after_ms
        ? { kind: 'input_awaited', ...base, threshold_ms: thresholds.input_after_ms, threshold_from: 'query' }
        : undefined;
    default:
      return undefined;
  }
}

/** Newest first: the step that most recently came to need someone leads. Ties by ref, for a stable order. */
export function compareTriage(a: TriageItem, b: TriageItem): number {
  const bySince = instantMs(b.since) - instantMs(a.since);
  if (bySince !== 0) return bySince;
  return a.operation_ref < b.operation_ref ? -1 : a.operation_ref > b.operation_ref ? 1 : 0;
}

export interface TriageCounts {
  total: number;
  by_kind: Record<TriageKind, number>;
  by_tool: Record<string, number>;
  by_reason: Record<string, number>;
}

export function countTriage(items: readonly TriageItem[]): TriageCounts {
  const counts: TriageCounts = {
    total: items.length,
    by_kind: {
      possible_duplicate: 0,
      escalated: 0,
      awaiting_approval: 0,
      unknown_outcome: 0,
      dispatch_overdue: 0,
      retry_overdue: 0,
      input_awaited: 0,
      acknowledged: 0,
    },
    by_tool: {},
    by_reason: {},
  };
  for (const item of items) {
    counts.by_kind[item.kind] += 1;
    counts.by_tool[item.tool] = (counts.by_tool[item.tool] ?? 0) + 1;
    counts.by_reason[item.reason] = (counts.by_reason[item.reason] ?? 0) + 1;
  }
  return counts;
}
