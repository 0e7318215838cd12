import {
  countDispatch,
  type DirectiveAction,
  dispatchTimeoutMs,
  dueWork,
  NO_ATTEMPTS,
  type SideEffect,
  type StepStatus,
} from '@recovery-ledger/core';
import { asLedgerEvent } from '../ledger-events';
import { alreadyApplied, instantMs, scopedKey, textOf, type ProjectedEvent, type Projection } from '../projection';

/**
 * The step state index: where every operation stands, queryable by state, tool, run and age
 * (docs/contract.md §5). The recovery list for restarted workers reads it. Decisions never do: they fold the
 * operation's own stream.
 */
export interface StepStateDoc {
  tenant: string;
  operation_ref: string;
  /** `unplanned` only if a stream ever starts with something other than StepPlanned. */
  status: StepStatus | 'unplanned';
  run_id: string;
  tool: string;
  side_effect: SideEffect | 'unknown';
  verification_tool?: string;
  /**
   * How long an attempt may stay in flight before it is judged abandoned: the work feed hands it out
   * for verification then, and the triage queue shows it (the policy's default for plans stored
   * before the field existed).
   */
  dispatch_timeout_ms?: number;
  /**
   * The plan's consistency window: a step verifying this long after its call's end can be settled
   * by a lookup either way (docs/contract.md §4.5), and the triage queue shows it from then on.
   * Absent in documents folded before it was kept.
   */
  consistency_window_ms?: number;
  /** When the current status began (ledger clock). */
  since: string;
  /** The reason code of the last transition. */
  reason: string;
  attempts_used: number;
  current_attempt: number;
  attempts_remaining: number;
  next_action: DirectiveAction;
  not_before?: string;
  planned_at: string;
  /** recorded_at of the last event applied. */
  updated_at: string;
  /**
   * What this operation added to the trust metrics (trust-metrics.projection.ts counts the same
   * events), so each figure can open the list of operations it counts.
   */
  unknown_outcomes: number;
  resolved_by_lookup: number;
  duplicates_prevented: number;
  identical_retries_blocked: number;
  unverified_dispatches_refused: number;
  /**
   * An operator took the escalation (EscalationAcknowledged, docs/contract.md §4.10): who, for whom,
   * when. It leaves "Needs a person" for "Acknowledged"; the next transition clears it.
   */
  acknowledged?: { assignee: string; by: string; at: string; note?: string };
  /** Late outcomes that may have reached the provider after a later attempt was granted (docs/contract.md §4.9); absent in older documents. */
  possible_duplicates?: number;
  revision: number;
  position: number;
}

function emptyDoc(event: ProjectedEvent): StepStateDoc {
  return {
    tenant: event.metadata.tenant,
    operation_ref: event.metadata.operation_ref,
    status: 'unplanned',
    run_id: '',
    tool: '',
    side_effect: 'unknown',
    since: event.metadata.recorded_at,
    reason: 'UNPLANNED',
    ...NO_ATTEMPTS,
    attempts_remaining: 0,
    next_action: 'none',
    planned_at: event.metadata.recorded_at,
    updated_at: event.metadata.recorded_at,
    unknown_outcomes: 0,
    resolved_by_lookup: 0,
    duplicates_prevented: 0,
    identical_retries_blocked: 0,
    unverified_dispatches_refused: 0,
    revision: -1,
    position: 0,
  };
}

export function evolveStepState(current: StepStateDoc | undefined, event: ProjectedEvent): StepStateDoc {
  if (alreadyApplied(current, event)) return current as StepStateDoc;
  const base = current ?? emptyDoc(event);
  const doc: StepStateDoc = {
    ...base,
    revision: event.revision,
    position: event.position,
    updated_at: event.metadata.recorded_at,
  };
  const ledgerEvent = asLedgerEvent(event);
  if (!ledgerEvent) return doc;
  switch (ledgerEvent.type) {
    case 'StepPlanned': {
      // A plan repeated with the same definition appends nothing; a second one is never stored.
      if (base.status !== 'unplanned') return doc;
      const { run_id, tool, side_effect, policy } = ledgerEvent.data;
      doc.status = 'planned';
      doc.run_id = textOf(run_id ?? '');
      doc.tool = textOf(tool ?? '');
      doc.side_effect = side_effect === 'read' || side_effect === 'write' ? side_effect : 'unknown';
      if (typeof policy?.verification_tool === 'string') doc.verification_tool = policy.verification_tool;
      doc.dispatch_timeout_ms = dispatchTimeoutMs(policy);
      if (typeof policy?.consistency_window_ms === 'number') doc.consistency_window_ms = policy.consistency_window_ms;
      doc.attempts_remaining = typeof policy?.max_attempts === 'number' ? policy.max_attempts : 0;
      doc.next_action = 'dispatch';
      doc.reason = 'STEP_PLANNED';
      doc.since = event.metadata.recorded_at;
      doc.planned_at = event.metadata.recorded_at;
      return doc;
    }
    case 'AttemptDispatched':
      return { ...doc, ...countDispatch(base, ledgerEvent.data.attempt) };
    case 'TransitionRecorded': {
      const { to, reason, directive } = ledgerEvent.data;
      delete doc.acknowledged;
      // An envelope whose outcome is unknown is what sends a step to verifying.
      if (to === 'verifying' && base.status !== 'verifying') doc.unknown_outcomes = (base.unknown_outcomes ?? 0) + 1;
      doc.status = to;
      doc.reason = textOf(reason ?? '');
      doc.since = event.metadata.recorded_at;
      if (directive) {
        doc.next_action = directive.next_action;
        doc.attempts_remaining = directive.attempts_remaining;
        if (directive.not_before === undefined) delete doc.not_before;
        else doc.not_before = directive.not_before;
      }
      return doc;
    }
    case 'VerificationRecorded': {
      // A lookup of an attempt that never answered resolves an unknown outcome too (in flight).
      if (base.status === 'dispatched') doc.unknown_outcomes = (base.unknown_outcomes ?? 0) + 1;
      const { outcome } = ledgerEvent.data;
      if (outcome === 'found_committed' || outcome === 'not_found')
        doc.resolved_by_lookup = (base.resolved_by_lookup ?? 0) + 1;
      return doc;
    }
    case 'OutcomeVerifiedManually':
      // A person's lookup resolves an unknown outcome as an automated one does; metrics tell them apart.
      if (base.status === 'dispatched') doc.unknown_outcomes = (base.unknown_outcomes ?? 0) + 1;
      return doc;
    case 'EscalationAcknowledged': {
      const { assignee, note } = ledgerEvent.data;
      doc.acknowledged = {
        assignee: textOf(assignee),
        by: event.metadata.actor,
        at: event.metadata.recorded_at,
        ...(typeof note === 'string' && note !== '' ? { note } : {}),
      };
      return doc;
    }
    case 'LateOutcomeRecorded':
      if (ledgerEvent.data.possible_duplicate === true) doc.possible_duplicates = (base.possible_duplicates ?? 0) + 1;
      return doc;
    case 'DispatchRefused': {
      const { code } = ledgerEvent.data;
      if (code === 'DUPLICATE_PREVENTED') doc.duplicates_prevented = (base.duplicates_prevented ?? 0) + 1;
      else if (code === 'UNCHANGED_RETRY') doc.identical_retries_blocked = (base.identical_retries_blocked ?? 0) + 1;
      else if (code === 'ATTEMPT_IN_FLIGHT' || code === 'VERIFY_BEFORE_RETRY') {
        doc.unverified_dispatches_refused = (base.unverified_dispatches_refused ?? 0) + 1;
      }
      return doc;
    }
    default:
      // Envelopes and approvals change the status only through the TransitionRecorded the ledger
      // appends beside them.
      return doc;
  }
}

/** When the work feed may hand the step out (packages/core/src/domain/work-due.ts); null when never. */
export function stepDueMs(doc: StepStateDoc): number | null {
  if (doc.status === 'unplanned') return null;
  const due = dueWork({
    status: doc.status,
    operation_ref: doc.operation_ref,
    attempts_used: doc.attempts_used,
    since_ms: instantMs(doc.since),
    ...(doc.not_before === undefined ? {} : { not_before_ms: instantMs(doc.not_before) }),
    dispatch_timeout_ms: dispatchTimeoutMs({ dispatch_timeout_ms: doc.dispatch_timeout_ms }),
  });
  return due === undefined ? null : due.due_ms;
}

export const stepStateProjection: Projection<StepStateDoc> = {
  name: 'step_state',
  // 2: documents carry the plan's dispatch_timeout_ms and the trust counters of the operation.
  // 3: the work feed's due_ms and revision columns.
  // 4: the possible_duplicates column (triage and `has=` read it).
  // 5: operator facts (acknowledged escalations, cancelled steps).
  // 6: documents carry the plan's consistency_window_ms (triage judges an unknown outcome by it).
  version: 6,
  keyOf: (event) => scopedKey(event.metadata.tenant, event.metadata.operation_ref),
  evolve: evolveStepState,
  columns: {
    tenant: 'text',
    operation_ref: 'text',
    status: 'text',
    tool: 'text',
    run_id: 'text',
    since_ms: 'integer',
    unknown_outcomes: 'integer',
    resolved_by_lookup: 'integer',
    duplicates_prevented: 'integer',
    identical_retries_blocked: 'integer',
    unverified_dispatches_refused: 'integer',
    possible_duplicates: 'integer',
    due_ms: 'integer',
    revision: 'integer',
  },
  // Recovery: tenant + status (+ tool), oldest first; a run's steps: tenant + run.
  indexes: [
    ['tenant', 'status', 'since_ms'],
    ['tenant', 'tool', 'status', 'since_ms'],
    ['tenant', 'run_id'],
    // The work feed: a tenant's due steps of a tool, earliest first.
    ['tenant', 'tool', 'due_ms'],
  ],
  index: (doc) => ({
    tenant: doc.tenant,
    operation_ref: doc.operation_ref,
    status: doc.status,
    tool: doc.tool,
    run_id: doc.run_id,
    since_ms: instantMs(doc.since),
    unknown_outcomes: doc.unknown_outcomes ?? 0,
    resolved_by_lookup: doc.resolved_by_lookup ?? 0,
    duplicates_prevented: doc.duplicates_prevented ?? 0,
    identical_retries_blocked: doc.identical_retries_blocked ?? 0,
    unverified_dispatches_refused: doc.unverified_dispatches_refused ?? 0,
    possible_duplicates: doc.possible_duplicates ?? 0,
    due_ms: stepDueMs(doc),
    revision: doc.revision,
  }),
};
