import { TRANSITION_REASONS } from '@recovery-ledger/core';
import {
  emptyHistogram,
  merge,
  record,
  summarise,
  type DurationHistogram,
  type DurationSummary,
} from './duration-histogram';
import { asLedgerEvent } from '../ledger-events';
import { alreadyApplied, instantMs, scopedKey, textOf, type ProjectedEvent, type Projection } from '../projection';

/**
 * Trust metrics per tenant and tool (docs/contract.md §5, and the contract's "measure outcomes that indicate
 * trust, not just error rate"): unknown outcomes and how they were resolved, duplicate writes
 * prevented, identical retries blocked, time spent in pending recovery, terminal escalations.
 *
 * Pending recovery starts when a step enters `verifying` (its envelope said the outcome is unknown)
 * or, for a worker that died after dispatching, at the dispatch of the attempt a verification later
 * resolves while still `dispatched` (no envelope ever came back). It ends with that verification.
 * Both are timed on the transition the verification causes, from its `from_since`: the document
 * keeps counters only, never a map per operation, so an event costs the same however many
 * operations are in flight (docs/performance.md measured 20 % of a dispatch's CPU in such a map).
 */
export interface TrustCounters {
  operations_planned: number;
  /** Outcomes that had to be verified: unknown envelopes plus in-flight attempts verified. */
  unknown_outcomes: number;
  unknown_via_envelope: number;
  unknown_in_flight: number;
  verified_found_committed: number;
  verified_not_found: number;
  lookup_unavailable: number;
  /**
   * Unknown outcomes a person settled (OutcomeVerifiedManually, docs/contract.md §4.10), counted
   * apart from automated lookups: a tool whose outcomes people keep resolving by hand lacks a
   * working verification. Documents stored before they existed lack them (read as 0).
   */
  manually_verified_found_committed: number;
  manually_verified_not_found: number;
  /** Steps an operator cancelled, and escalations an operator reopened with a new budget. */
  cancelled: number;
  reopened: number;
  /** Dispatches on a succeeded step, answered with the original success (docs/contract.md §4.7). */
  duplicate_writes_prevented: number;
  /** Dispatches with the same input hash after correct_input (docs/contract.md §4.2). */
  identical_retries_blocked: number;
  /** Dispatches refused while an attempt was in flight or its outcome unverified (docs/contract.md §4.1). */
  unverified_dispatches_refused: number;
  terminal_escalations: number;
  succeeded: number;
  /**
   * Late outcomes that may have reached the provider (a success, or an unknown or committed
   * failure), reported by an attempt after a later attempt was granted (docs/contract.md §4.9): the
   * provider may hold two writes. Documents stored before it existed lack it (read as 0).
   */
  possible_duplicates: number;
}

export interface TrustMetricsDoc extends TrustCounters {
  tenant: string;
  tool: string;
  dispatch_refusals: Record<string, number>;
  escalations_by_reason: Record<string, number>;
  pending_recovery: DurationHistogram;
  /** Operations in `verifying` now: +1 on entering it, -1 on leaving it. */
  pending_recovery_now: number;
  /** The event id of the last verification, to know the transition it causes (see evolve). */
  last_verification_id?: string;
  position: number;
}

export const TRUST_COUNTER_NAMES: readonly (keyof TrustCounters)[] = [
  'operations_planned',
  'unknown_outcomes',
  'unknown_via_envelope',
  'unknown_in_flight',
  'verified_found_committed',
  'verified_not_found',
  'lookup_unavailable',
  'manually_verified_found_committed',
  'manually_verified_not_found',
  'cancelled',
  'reopened',
  'duplicate_writes_prevented',
  'identical_retries_blocked',
  'unverified_dispatches_refused',
  'terminal_escalations',
  'succeeded',
  'possible_duplicates',
];

const UNVERIFIED_REFUSALS: readonly string[] = ['ATTEMPT_IN_FLIGHT', 'VERIFY_BEFORE_RETRY'];

/** Reasons only a verification gives a transition. */
const VERIFICATION_REASONS: readonly string[] = [
  TRANSITION_REASONS.verifiedCommitted,
  TRANSITION_REASONS.verifiedNotFound,
  TRANSITION_REASONS.lookupUnavailable,
  TRANSITION_REASONS.manuallyVerifiedCommitted,
  TRANSITION_REASONS.manuallyVerifiedNotFound,
];

export function emptyCounters(): TrustCounters {
  const counters = {} as TrustCounters;
  for (const name of TRUST_COUNTER_NAMES) counters[name] = 0;
  return counters;
}

function emptyDoc(tenant: string, tool: string): TrustMetricsDoc {
  return {
    tenant,
    tool,
    ...emptyCounters(),
    dispatch_refusals: {},
    escalations_by_reason: {},
    pending_recovery: emptyHistogram(),
    pending_recovery_now: 0,
    position: 0,
  };
}

function increment(map: Record<string, number>, key: string): Record<string, number> {
  return { ...map, [key]: (map[key] ?? 0) + 1 };
}

export function evolveTrustMetrics(current: TrustMetricsDoc | undefined, event: ProjectedEvent): TrustMetricsDoc {
  if (alreadyApplied(current, event)) return current as TrustMetricsDoc;
  const ledgerEvent = asLedgerEvent(event);
  // A tool's document starts with the plan of its first operation: that is where the link is made.
  const base =
    current ??
    emptyDoc(event.metadata.tenant, ledgerEvent?.type === 'StepPlanned' ? textOf(ledgerEvent.data.tool) : '');
  const doc: TrustMetricsDoc = { ...base, position: event.position };
  if (!ledgerEvent) return doc;
  const at = instantMs(event.metadata.recorded_at);
  switch (ledgerEvent.type) {
    case 'StepPlanned':
      doc.operations_planned = base.operations_planned + 1;
      return doc;
    case 'VerificationRecorded': {
      const { outcome } = ledgerEvent.data;
      doc.last_verification_id = event.event_id;
      if (outcome === 'found_committed') doc.verified_found_committed = base.verified_found_committed + 1;
      else if (outcome === 'not_found') doc.verified_not_found = base.verified_not_found + 1;
      else if (outcome === 'lookup_unavailable') doc.lookup_unavailable = base.lookup_unavailable + 1;
      return doc;
    }
    case 'OutcomeVerifiedManually': {
      doc.last_verification_id = event.event_id;
      if (ledgerEvent.data.outcome === 'found_committed')
        doc.manually_verified_found_committed = (base.manually_verified_found_committed ?? 0) + 1;
      else doc.manually_verified_not_found = (base.manually_verified_not_found ?? 0) + 1;
      return doc;
    }
    case 'StepCancelled':
      doc.cancelled = (base.cancelled ?? 0) + 1;
      return doc;
    case 'StepReopened':
      doc.reopened = (base.reopened ?? 0) + 1;
      return doc;
    case 'LateOutcomeRecorded':
      if (ledgerEvent.data.possible_duplicate === true) doc.possible_duplicates = (base.possible_duplicates ?? 0) + 1;
      return doc;
    case 'DispatchRefused': {
      const { code } = ledgerEvent.data;
      doc.dispatch_refusals = increment(base.dispatch_refusals, textOf(code));
      if (code === 'DUPLICATE_PREVENTED') doc.duplicate_writes_prevented = base.duplicate_writes_prevented + 1;
      else if (code === 'UNCHANGED_RETRY') doc.identical_retries_blocked = base.identical_retries_blocked + 1;
      else if (UNVERIFIED_REFUSALS.includes(code))
        doc.unverified_dispatches_refused = base.unverified_dispatches_refused + 1;
      return doc;
    }
    case 'TransitionRecorded': {
      const { from, to, reason, caused_by, from_since } = ledgerEvent.data;
      if (to === 'verifying' && from !== 'verifying') {
        doc.pending_recovery_now = base.pending_recovery_now + 1;
        doc.unknown_outcomes = base.unknown_outcomes + 1;
        doc.unknown_via_envelope = base.unknown_via_envelope + 1;
      }
      // Verified while still dispatched: the outcome was unknown since the dispatch. The reason
      // says so, except when not_found meets a bound (ATTEMPTS_EXHAUSTED), which an envelope can
      // cause too; then the cause does: a fact and its transition are appended together, so the
      // verification is the last one this document saw.
      const causedByVerification =
        VERIFICATION_REASONS.includes(textOf(reason)) ||
        (caused_by !== undefined && caused_by === base.last_verification_id);
      const verifiedInFlight = from === 'dispatched' && causedByVerification;
      if (verifiedInFlight) {
        doc.unknown_outcomes = base.unknown_outcomes + 1;
        doc.unknown_in_flight = base.unknown_in_flight + 1;
      }
      if (from === 'verifying' && to !== 'verifying') doc.pending_recovery_now = base.pending_recovery_now - 1;
      // A log written before transitions carried from_since: counted above, but not timed.
      if ((from === 'verifying' || verifiedInFlight) && typeof from_since === 'string') {
        doc.pending_recovery = record(base.pending_recovery, at - instantMs(from_since));
      }
      if (to === 'escalated') {
        doc.terminal_escalations = base.terminal_escalations + 1;
        doc.escalations_by_reason = increment(base.escalations_by_reason, textOf(reason));
      }
      if (to === 'succeeded') doc.succeeded = base.succeeded + 1;
      return doc;
    }
    default:
      return doc;
  }
}

export const trustMetricsProjection: Projection<TrustMetricsDoc> = {
  name: 'trust_metrics',
  // 2: pending recovery timed from transitions' from_since, no per-operation maps.
  version: 2,
  linkOf: (event) => {
    const ledgerEvent = asLedgerEvent(event);
    if (ledgerEvent?.type !== 'StepPlanned' || typeof ledgerEvent.data.tool !== 'string') return undefined;
    return scopedKey(event.metadata.tenant, ledgerEvent.data.tool);
  },
  keyOf: (_event, link) => link,
  evolve: evolveTrustMetrics,
  columns: { tenant: 'text', tool: 'text' },
  indexes: [['tenant', 'tool']],
  index: (doc) => ({ tenant: doc.tenant, tool: doc.tool }),
};

/** What readers see of a tool (or of all tools): the counters, the breakdowns and the percentiles. */
export interface TrustReport extends TrustCounters {
  resolved_by_verification: number;
  pending_recovery_now: number;
  pending_recovery: DurationSummary;
  dispatch_refusals: Record<string, number>;
  escalations_by_reason: Record<string, number>;
}

function addCounts(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const sum = { ...a };
  for (const [key, count] of Object.entries(b)) sum[key] = (sum[key] ?? 0) + count;
  return sum;
}

/** Sums documents (one tool's, or every tool's for the overall figure); histograms merge exactly. */
export function trustReport(docs: readonly TrustMetricsDoc[]): TrustReport {
  const counters = emptyCounters();
  let histogram = emptyHistogram();
  let refusals: Record<string, number> = {};
  let escalations: Record<string, number> = {};
  let pendingNow = 0;
  for (const doc of docs) {
    for (const name of TRUST_COUNTER_NAMES) counters[name] += doc[name] ?? 0;
    histogram = merge(histogram, doc.pending_recovery);
    refusals = addCounts(refusals, doc.dispatch_refusals);
    escalations = addCounts(escalations, doc.escalations_by_reason);
    pendingNow += doc.pending_recovery_now;
  }
  return {
    ...counters,
    resolved_by_verification: counters.verified_found_committed + counters.verified_not_found,
    pending_recovery_now: pendingNow,
    pending_recovery: summarise(histogram),
    dispatch_refusals: refusals,
    escalations_by_reason: escalations,
  };
}
