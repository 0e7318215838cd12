import { countDispatch, isTerminalStatus, NO_ATTEMPTS, type SideEffect, type StepStatus } from '@recovery-ledger/core';
import { asLedgerEvent } from '../ledger-events';
import { alreadyApplied, instantMs, scopedKey, textOf, type ProjectedEvent, type Projection } from '../projection';

/**
 * The run summary (docs/contract.md §5): the steps of one run and where each stands. Only StepPlanned names the
 * run, so the projection links each operation's stream to its run there, and every later event of
 * that stream lands in the run's document.
 */
export interface RunStep {
  operation_ref: string;
  tool: string;
  side_effect: SideEffect;
  status: StepStatus | 'unplanned';
  since: string;
  reason: string;
  attempts_used: number;
  current_attempt: number;
  planned_at: string;
  /** Log position of the plan: the run lists its steps in the order they were planned. */
  planned_position: number;
  revision: number;
}

export interface RunSummaryDoc {
  tenant: string;
  run_id: string;
  /** By operation_ref; the answer orders them by planned_position. */
  steps: Record<string, RunStep>;
  counts: Partial<Record<StepStatus | 'unplanned', number>>;
  total: number;
  /** Steps not yet succeeded or escalated. */
  open: number;
  started_at: string;
  updated_at: string;
  position: number;
}

function recount(doc: RunSummaryDoc, from: RunStep['status'] | undefined, to: RunStep['status']): void {
  const counts = { ...doc.counts };
  if (from !== undefined) {
    const left = (counts[from] ?? 0) - 1;
    if (left > 0) counts[from] = left;
    else delete counts[from];
    if (!isTerminalStatus(from)) doc.open -= 1;
  }
  counts[to] = (counts[to] ?? 0) + 1;
  if (!isTerminalStatus(to)) doc.open += 1;
  doc.counts = counts;
}

export function runKeyOf(tenant: string, runId: string): string {
  return scopedKey(tenant, runId);
}

export function evolveRunSummary(current: RunSummaryDoc | undefined, event: ProjectedEvent): RunSummaryDoc {
  if (alreadyApplied(current, event)) return current as RunSummaryDoc;
  const ledgerEvent = asLedgerEvent(event);
  const ref = event.metadata.operation_ref;
  const base: RunSummaryDoc = current ?? {
    tenant: event.metadata.tenant,
    run_id: ledgerEvent?.type === 'StepPlanned' ? textOf(ledgerEvent.data.run_id) : '',
    steps: {},
    counts: {},
    total: 0,
    open: 0,
    started_at: event.metadata.recorded_at,
    updated_at: event.metadata.recorded_at,
    position: 0,
  };
  const doc: RunSummaryDoc = { ...base, position: event.position, updated_at: event.metadata.recorded_at };
  const step = base.steps[ref];
  if (!ledgerEvent) return doc;
  switch (ledgerEvent.type) {
    case 'StepPlanned': {
      if (step) return doc;
      const planned: RunStep = {
        operation_ref: ref,
        tool: ledgerEvent.data.tool,
        side_effect: ledgerEvent.data.side_effect,
        status: 'planned',
        since: event.metadata.recorded_at,
        reason: 'STEP_PLANNED',
        ...NO_ATTEMPTS,
        planned_at: event.metadata.recorded_at,
        planned_position: event.position,
        revision: event.revision,
      };
      doc.steps = { ...base.steps, [ref]: planned };
      doc.total = base.total + 1;
      recount(doc, undefined, 'planned');
      return doc;
    }
    case 'AttemptDispatched':
      if (!step) return doc;
      doc.steps = {
        ...base.steps,
        [ref]: { ...step, ...countDispatch(step, ledgerEvent.data.attempt), revision: event.revision },
      };
      return doc;
    case 'TransitionRecorded': {
      if (!step) return doc;
      const { to, reason } = ledgerEvent.data;
      doc.steps = {
        ...base.steps,
        [ref]: { ...step, status: to, reason, since: event.metadata.recorded_at, revision: event.revision },
      };
      // The plan already counted its step as planned; the transition that records it changes nothing.
      if (step.status !== to) recount(doc, step.status, to);
      return doc;
    }
    default:
      if (!step) return doc;
      doc.steps = { ...base.steps, [ref]: { ...step, revision: event.revision } };
      return doc;
  }
}

export const runSummaryProjection: Projection<RunSummaryDoc> = {
  name: 'run_summary',
  version: 1,
  linkOf: (event) => {
    const ledgerEvent = asLedgerEvent(event);
    if (ledgerEvent?.type !== 'StepPlanned' || typeof ledgerEvent.data.run_id !== 'string') return undefined;
    return runKeyOf(event.metadata.tenant, ledgerEvent.data.run_id);
  },
  keyOf: (_event, link) => link,
  evolve: evolveRunSummary,
  columns: { tenant: 'text', run_id: 'text', open: 'integer', updated_ms: 'integer' },
  indexes: [
    ['tenant', 'run_id'],
    ['tenant', 'updated_ms'],
  ],
  index: (doc) => ({ tenant: doc.tenant, run_id: doc.run_id, open: doc.open, updated_ms: instantMs(doc.updated_at) }),
};
