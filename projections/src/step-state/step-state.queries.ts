import type { StepStatus } from '@recovery-ledger/core';
import { pageOf } from '../page-cursor';
import { instantMs } from '../projection';
import type { Condition, QueryScope, ReadPosition } from '../read-model';
import type { StepStateDoc } from './step-state.projection';
import {
  compareTriage,
  countTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  ON_REQUEST_KINDS,
  triageItemOf,
  waitingItemOf,
  type TriageCounts,
  type TriageItem,
  type TriageKind,
  type TriageWaitingItem,
} from './triage';

/*
 * The typed queries the readers' side takes. The HTTP edge builds them from query strings and
 * refuses bad ones (src/http/read-queries.ts); here every field is already checked, and a page's
 * `limit` is already defaulted and bounded.
 */

export interface RecoveryQuery extends ReadPosition {
  status?: StepStatus;
  tool?: string;
  runId?: string;
  /** Only steps in their status at least this long, by the ledger's clock. */
  olderThanMs?: number;
  limit: number;
  /** After `(since in ms, operation_ref or key)`. */
  cursor?: [number, string];
}

export interface StepListQuery extends RecoveryQuery {
  /** Text the operation_ref contains. */
  refContains?: string;
  has?: TrustFlag;
  newest?: boolean;
}

export interface RecoveryItem {
  operation_ref: string;
  tool: string;
  run_id: string;
  status: StepStatus;
  since: string;
  attempt: number;
  attempts_used: number;
  side_effect: string;
  reason: string;
  verification_tool?: string;
  revision: number;
}

export interface RecoveryAnswer {
  items: RecoveryItem[];
  next_cursor?: string;
  as_of_position: number;
}

export interface TriageQuery extends ReadPosition {
  kind?: TriageKind;
  tool?: string;
  runId?: string;
  reason?: string;
  refContains?: string;
  olderThanMs?: number;
  unknownAfterMs?: number;
  /** Judge every dispatch by this timeout instead of its plan's own. */
  dispatchTimeoutMs?: number;
  retryGraceMs?: number;
  inputAfterMs?: number;
  limit: number;
  cursor?: [number, string];
}

export interface TriageAnswer {
  items: TriageItem[];
  /** Over every item that matches the filters, whatever page is asked. */
  counts: TriageCounts;
  thresholds: { unknown_after_ms: number; dispatch_timeout_ms: number; retry_grace_ms: number; input_after_ms: number };
  /**
   * Unknown outcomes that need no person yet, soonest due first (at most WAITING_LIMIT), when the
   * query is not narrowed to another kind: without them a first unknown outcome reads as "nothing
   * needs a person".
   */
  waiting: TriageWaitingItem[];
  next_cursor?: string;
  /** The ledger's clock when the queue was judged. */
  as_of: string;
  as_of_position: number;
}

/** Statuses a triage item can stand in (see ./triage.ts). */
const TRIAGE_STATUSES: readonly StepStatus[] = [
  'escalated',
  'awaiting_approval',
  'verifying',
  'dispatched',
  'retry_scheduled',
  'needs_input',
];
export const RECOVERY_STATUSES: readonly StepStatus[] = ['dispatched', 'verifying'];
/** `has=` on the operations list: the operations a trust figure counts (a step_state column each). */
export const TRUST_FLAGS = [
  'unknown_outcomes',
  'resolved_by_lookup',
  'duplicates_prevented',
  'identical_retries_blocked',
  'unverified_dispatches_refused',
  'possible_duplicates',
] as const;
export type TrustFlag = (typeof TRUST_FLAGS)[number];

/** Which of these operation_refs of the caller's tenant a worker's lease holds now (the work feed knows). */
export type HeldRefs = (operationRefs: string[]) => Promise<Set<string>>;

/** The tenant's steps in these statuses, oldest in their status first, by state, tool, run and age (docs/contract.md §5). */
export function stepList(
  { readModel, tenant, asOf, clock }: QueryScope,
  query: StepListQuery,
  statuses: readonly StepStatus[],
): RecoveryAnswer {
  const { olderThanMs, tool, runId, status, limit, cursor, refContains, has, newest = false } = query;
  const where: Condition[] = [
    { column: 'tenant', op: '=', value: tenant },
    { column: 'status', op: 'in', values: status ? [status] : statuses },
  ];
  if (tool !== undefined) where.push({ column: 'tool', op: '=', value: tool });
  if (runId !== undefined) where.push({ column: 'run_id', op: '=', value: runId });
  // Age is judged by the ledger's clock, never the client's (docs/contract.md §4).
  if (olderThanMs !== undefined)
    where.push({ column: 'since_ms', op: '<=', value: clock.now().getTime() - olderThanMs });
  if (refContains !== undefined) where.push({ column: 'operation_ref', op: 'contains', value: refContains });
  if (has !== undefined) where.push({ column: has, op: '>', value: 0 });
  if (cursor) where.push({ columns: ['since_ms', 'key'], op: newest ? '<' : '>', values: cursor });
  const rows = readModel.select<StepStateDoc>('step_state', {
    where,
    orderBy: [
      { column: 'since_ms', descending: newest },
      { column: 'key', descending: newest },
    ],
    limit: limit + 1,
  });
  const { page, next } = pageOf(rows, limit, (last) => [instantMs(last.doc.since), last.key]);
  return {
    items: page.map(({ doc }) => ({
      operation_ref: doc.operation_ref,
      tool: doc.tool,
      run_id: doc.run_id,
      status: doc.status as StepStatus,
      since: doc.since,
      attempt: doc.current_attempt,
      attempts_used: doc.attempts_used,
      side_effect: doc.side_effect,
      reason: doc.reason,
      ...(doc.verification_tool ? { verification_tool: doc.verification_tool } : {}),
      revision: doc.revision,
    })),
    ...next,
    as_of_position: asOf,
  };
}

export const WAITING_LIMIT = 20;

const compareRefs = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The triage queue (docs/contract.md §5): what needs a person now, newest first, with counts per
 * kind, tool and reason over everything that matches. Judged at the ledger's clock; the timed
 * kinds use the query's thresholds; a dispatch is judged by its plan's own `dispatch_timeout_ms`
 * unless the query names one.
 */
export async function triageOf(
  { readModel, tenant, asOf, clock }: QueryScope,
  query: TriageQuery,
  held: HeldRefs,
): Promise<TriageAnswer> {
  const { kind, tool, runId, reason, refContains, olderThanMs, limit, cursor } = query;
  const thresholds = {
    unknown_after_ms: query.unknownAfterMs ?? DEFAULT_TRIAGE_THRESHOLDS.unknown_after_ms,
    unknown_after_asked: query.unknownAfterMs !== undefined,
    dispatch_timeout_ms: query.dispatchTimeoutMs ?? DEFAULT_TRIAGE_THRESHOLDS.dispatch_timeout_ms,
    dispatch_timeout_asked: query.dispatchTimeoutMs !== undefined,
    retry_grace_ms: query.retryGraceMs ?? DEFAULT_TRIAGE_THRESHOLDS.retry_grace_ms,
    input_after_ms: query.inputAfterMs ?? DEFAULT_TRIAGE_THRESHOLDS.input_after_ms,
  };
  const now = clock.now();
  const filters: Condition[] = [];
  if (tool !== undefined) filters.push({ column: 'tool', op: '=', value: tool });
  if (runId !== undefined) filters.push({ column: 'run_id', op: '=', value: runId });
  if (refContains !== undefined) filters.push({ column: 'operation_ref', op: 'contains', value: refContains });
  if (olderThanMs !== undefined) filters.push({ column: 'since_ms', op: '<=', value: now.getTime() - olderThanMs });
  const byTenant: Condition = { column: 'tenant', op: '=', value: tenant };
  // Every candidate is judged in memory: the timed kinds depend on each step's own timeout. Steps
  // in these four states, and steps that may hold a duplicate write in any state, are the
  // exceptions of a tenant, not its volume.
  const inTriageStatus = readModel.select<StepStateDoc>('step_state', {
    where: [byTenant, { column: 'status', op: 'in', values: TRIAGE_STATUSES }, ...filters],
  });
  const possibleDuplicates = readModel
    .select<StepStateDoc>('step_state', {
      where: [byTenant, { column: 'possible_duplicates', op: '>=', value: 1 }, ...filters],
    })
    .filter(({ doc }) => !TRIAGE_STATUSES.includes(doc.status as StepStatus));
  const waiting =
    kind === undefined || kind === 'unknown_outcome'
      ? inTriageStatus
          .map(({ doc }) => waitingItemOf(doc, now.getTime(), thresholds))
          .filter((item): item is TriageWaitingItem => item !== undefined)
          .filter((item) => reason === undefined || item.reason === reason)
          .sort((a, b) => instantMs(a.due_at) - instantMs(b.due_at) || compareRefs(a.operation_ref, b.operation_ref))
          .slice(0, WAITING_LIMIT)
      : [];
  const judged = [...inTriageStatus, ...possibleDuplicates]
    .map(({ doc }) => triageItemOf(doc, now.getTime(), thresholds))
    .filter((item): item is TriageItem => item !== undefined)
    .filter((item) => reason === undefined || item.reason === reason)
    .sort(compareTriage);
  // A retry past its time that a worker's lease holds is being run, not overdue.
  const overdueRetries = judged.filter((item) => item.kind === 'retry_overdue').map((item) => item.operation_ref);
  const heldNow = overdueRetries.length === 0 ? new Set<string>() : await held(overdueRetries);
  const unheld = judged.filter((item) => item.kind !== 'retry_overdue' || !heldNow.has(item.operation_ref));
  const acknowledged = unheld.filter((item) => item.kind === 'acknowledged').length;
  const matching = unheld.filter((item) =>
    kind === undefined ? !ON_REQUEST_KINDS.includes(item.kind) : item.kind === kind,
  );
  const after = cursor
    ? matching.filter((item) => {
        const since = instantMs(item.since);
        return since < cursor[0] || (since === cursor[0] && item.operation_ref > cursor[1]);
      })
    : matching;
  const { page: items, next } = pageOf(after, limit, (last) => [instantMs(last.since), last.operation_ref]);
  return {
    items,
    // The acknowledged count stands beside "Needs a person" whatever the list shows.
    counts: { ...countTriage(matching), by_kind: { ...countTriage(matching).by_kind, acknowledged } },
    thresholds: {
      unknown_after_ms: thresholds.unknown_after_ms,
      dispatch_timeout_ms: thresholds.dispatch_timeout_ms,
      retry_grace_ms: thresholds.retry_grace_ms,
      input_after_ms: thresholds.input_after_ms,
    },
    waiting,
    ...next,
    as_of: now.toISOString(),
    as_of_position: asOf,
  };
}
