import { LedgerProblem, type StepStatus } from '@recovery-ledger/core';
import { pageOf } from '../page-cursor';
import { instantMs, scopedKey } from '../projection';
import type { Condition, QueryScope, ReadPosition } from '../read-model';
import type { RunStep, RunSummaryDoc } from './run-summary.projection';

export interface RunQuery extends ReadPosition {
  runId: string;
  status?: StepStatus | 'unplanned';
  tool?: string;
  limit: number;
  /** Steps planned after this position (0: from the first). */
  afterPlanned: number;
}

export interface RunAnswer extends RunListItem {
  steps: RunStep[];
  next_cursor?: string;
  as_of_position: number;
}

export interface RunListQuery extends ReadPosition {
  refContains?: string;
  openOnly: boolean;
  limit: number;
  /** After `(updated in ms, key)`. */
  cursor?: [number, string];
}

export interface RunListItem {
  run_id: string;
  total: number;
  open: number;
  counts: RunSummaryDoc['counts'];
  started_at: string;
  updated_at: string;
}

export interface RunListAnswer {
  runs: RunListItem[];
  next_cursor?: string;
  as_of_position: number;
}

/** One run's steps in the order they were planned, by status and tool (docs/contract.md §5). */
export function runOf({ readModel, tenant, asOf }: QueryScope, query: RunQuery): RunAnswer {
  const { runId, status, tool, limit, afterPlanned } = query;
  const doc = readModel.getDoc<RunSummaryDoc>('run_summary', scopedKey(tenant, runId));
  if (!doc)
    throw new LedgerProblem(
      'RUN_NOT_FOUND',
      'no step of this run is planned (or projected yet: see wait_for_position)',
    );
  const matching = Object.values(doc.steps)
    .filter((step) => step.planned_position > afterPlanned)
    .filter((step) => (status === undefined || step.status === status) && (tool === undefined || step.tool === tool))
    .sort((a, b) => a.planned_position - b.planned_position);
  const { page: steps, next } = pageOf(matching, limit, (last) => [last.planned_position]);
  return {
    ...runListItem(doc),
    steps,
    ...next,
    as_of_position: asOf,
  };
}

/** The tenant's runs, most recently changed first; `q` searches the run id, `open=true` keeps the unsettled. */
export function runList({ readModel, tenant, asOf }: QueryScope, query: RunListQuery): RunListAnswer {
  const { refContains, openOnly, limit, cursor } = query;
  const where: Condition[] = [{ column: 'tenant', op: '=', value: tenant }];
  if (refContains !== undefined) where.push({ column: 'run_id', op: 'contains', value: refContains });
  if (openOnly) where.push({ column: 'open', op: '>', value: 0 });
  if (cursor) where.push({ columns: ['updated_ms', 'key'], op: '<', values: cursor });
  const rows = readModel.select<RunSummaryDoc>('run_summary', {
    where,
    orderBy: [
      { column: 'updated_ms', descending: true },
      { column: 'key', descending: true },
    ],
    limit: limit + 1,
  });
  const { page, next } = pageOf(rows, limit, (last) => [instantMs(last.doc.updated_at), last.key]);
  return {
    runs: page.map(({ doc }) => runListItem(doc)),
    ...next,
    as_of_position: asOf,
  };
}

/** A run as a list shows it: its counts, without its steps. */
function runListItem(doc: RunSummaryDoc): RunListItem {
  return {
    run_id: doc.run_id,
    total: doc.total,
    open: doc.open,
    counts: doc.counts,
    started_at: doc.started_at,
    updated_at: doc.updated_at,
  };
}
