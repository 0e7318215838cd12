import { evidenceReport, type EvidenceReport, type EvidenceTrailDoc } from '@recovery-ledger/projections';
import { instantMs, scopedKey } from '@recovery-ledger/projections';
import type { RunStep, RunSummaryDoc } from '@recovery-ledger/projections';
import type { StepStateDoc } from '@recovery-ledger/projections';
import {
  compareTriage,
  countTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  triageItemOf,
  ON_REQUEST_KINDS,
  type TriageCounts,
  type TriageItem,
  type TriageKind,
} from '@recovery-ledger/projections';
import { trustReport, type TrustMetricsDoc, type TrustReport } from '@recovery-ledger/projections';
import { STEP_STATUSES, type StepStatus } from '@recovery-ledger/core/domain/events';
import type { Caller } from '../auth/caller';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';
import type { Clock } from '../shared/clock';
import type { EventStore, IndexedStream } from '../store/event-store.port';
import { operationStream, parseOperationStream } from '../store/stream-names';
import { pageOf } from '@recovery-ledger/projections';
import type { ProjectionRunner } from './projection-runner';
import type { Condition, ReadModel } from '../store/read-model.port';

export interface ProjectionQuerySettings {
  /** How long `wait_for_position` waits when the request names no `wait_timeout_ms`. */
  defaultWaitMs: number;
  maxWaitMs: number;
}

export const DEFAULT_QUERY_SETTINGS: ProjectionQuerySettings = { defaultWaitMs: 5_000, maxWaitMs: 30_000 };

export interface EvidenceAnswer extends EvidenceReport {
  next_cursor?: string;
  as_of_position: number;
}

export interface RunAnswer {
  run_id: string;
  total: number;
  open: number;
  counts: RunSummaryDoc['counts'];
  started_at: string;
  updated_at: string;
  steps: RunStep[];
  next_cursor?: string;
  as_of_position: number;
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

export interface TrustAnswer {
  overall: TrustReport & { tools: number };
  tools: Array<TrustReport & { tool: string }>;
  next_cursor?: string;
  as_of_position: number;
}

export interface TriageAnswer {
  items: TriageItem[];
  /** Over every item that matches the filters, whatever page is asked. */
  counts: TriageCounts;
  thresholds: { unknown_after_ms: number; dispatch_timeout_ms: number; retry_grace_ms: number; input_after_ms: number };
  next_cursor?: string;
  /** The ledger's clock when the queue was judged. */
  as_of: string;
  as_of_position: number;
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

export interface ChangesAnswer {
  /** The position every projection has reached. */
  position: number;
  /** Whether it moved past `after` before the wait ended. */
  changed: boolean;
  as_of: string;
}

/** Statuses a triage item can stand in (see projections/triage.ts). */
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

/*
 * The typed queries the readers' side takes. The HTTP edge builds them from query strings and
 * refuses bad ones (src/http/read-queries.ts); here every field is already checked, and a page's
 * `limit` is already defaulted and bounded.
 */

/** Read-your-writes: wait until the projection has applied the log this far, for at most `waitTimeoutMs`. */
export interface ReadPosition {
  waitForPosition?: number;
  waitTimeoutMs?: number;
}

export interface EvidenceQuery extends ReadPosition {
  operationRef: string;
  limit: number;
  /** Entries after this revision (-1: from the first). */
  afterRevision: number;
}

export interface RunQuery extends ReadPosition {
  runId: string;
  status?: StepStatus | 'unplanned';
  tool?: string;
  limit: number;
  /** Steps planned after this position (0: from the first). */
  afterPlanned: number;
}

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

export interface RunListQuery extends ReadPosition {
  refContains?: string;
  openOnly: boolean;
  limit: number;
  /** After `(updated in ms, key)`. */
  cursor?: [number, string];
}

export interface TrustQuery extends ReadPosition {
  tool?: string;
  limit: number;
  afterTool?: string;
}

export interface ChangesQuery {
  after: number;
  waitMs: number;
}

/**
 * The readers' side (docs/contract.md §5, §9): answers from the read model only, scoped to the caller's tenant
 * by the document keys and the tenant column, so another tenant's operation or run is not found
 * rather than forbidden. With `wait_for_position` a read first waits until its projection has
 * applied the log that far (read-your-writes), and answers 503 PROJECTION_LAGGING when it has not
 * in time.
 */
export interface QuerySources {
  /** The log, for the recovery listing (from the store's index, committed with the events). */
  store?: EventStore;
  /** False while the read models are being checked against the log or rebuilt: nothing is served from them then. */
  servable?: () => boolean;
}

/** Which of these operation_refs of the caller's tenant a worker's lease holds now (the work feed knows). */
export type HeldRefs = (operationRefs: string[]) => Promise<Set<string>>;

export class ProjectionQueries {
  constructor(
    private readonly engine: ProjectionRunner,
    private readonly readModel: ReadModel,
    private readonly clock: Clock,
    readonly settings: ProjectionQuerySettings = DEFAULT_QUERY_SETTINGS,
    private readonly sources: QuerySources = {},
  ) {}

  async evidence(caller: Caller, query: EvidenceQuery): Promise<EvidenceAnswer> {
    const { operationRef, limit, afterRevision } = query;
    const asOf = await this.waitIfAsked(query, 'evidence_trail');
    const doc = this.readModel.getDoc<EvidenceTrailDoc>('evidence_trail', scopedKey(caller.tenant, operationRef));
    if (!doc)
      throw new LedgerProblem(
        'OPERATION_NOT_FOUND',
        'the operation has no events (or they are not projected yet: see wait_for_position)',
      );
    const after = doc.entries.filter((entry) => entry.revision > afterRevision);
    const { page: entries, next } = pageOf(after, limit, (last) => [last.revision]);
    return {
      ...evidenceReport(doc, entries),
      ...next,
      as_of_position: asOf,
    };
  }

  async run(caller: Caller, query: RunQuery): Promise<RunAnswer> {
    const { runId, status, tool, limit, afterPlanned } = query;
    const asOf = await this.waitIfAsked(query, 'run_summary');
    const doc = this.readModel.getDoc<RunSummaryDoc>('run_summary', scopedKey(caller.tenant, runId));
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
      run_id: doc.run_id,
      total: doc.total,
      open: doc.open,
      counts: doc.counts,
      started_at: doc.started_at,
      updated_at: doc.updated_at,
      steps,
      ...next,
      as_of_position: asOf,
    };
  }

  /** Operations in flight or verifying, oldest first: what a restarted worker must verify (docs/contract.md §4). */
  async recovery(caller: Caller, query: RecoveryQuery): Promise<RecoveryAnswer> {
    const store = this.sources.store;
    if (!store) return this.listSteps(caller, query, RECOVERY_STATUSES);
    // The head first: the index read after it covers at least the log up to there.
    const head = await store.headPosition();
    const indexed = await store.indexedStreams(operationStream(caller.tenant, ''), RECOVERY_STATUSES);
    if (indexed) return this.recoveryFromIndex(indexed, query, head);
    // A store without an index: the projection, but only once it has applied the log up to the
    // head read at this request, so nothing in doubt at the time of the request is left out.
    return this.listSteps(caller, { ...query, waitForPosition: query.waitForPosition ?? head }, RECOVERY_STATUSES);
  }

  /** The recovery listing from the store's index: consistent with the log, whatever the read model holds. */
  private recoveryFromIndex(indexed: IndexedStream[], query: RecoveryQuery, head: number): RecoveryAnswer {
    const { olderThanMs, tool, runId, status, limit, cursor } = query;
    const cutoff = olderThanMs === undefined ? undefined : this.clock.now().getTime() - olderThanMs;
    const items = indexed
      .map((entry) => ({
        entry,
        ref: parseOperationStream(entry.stream)?.operationRef ?? '',
        sinceMs: instantMs(String(entry.data.since)),
      }))
      .filter(({ entry, sinceMs }) => {
        const data = entry.data;
        return (
          (status === undefined || entry.key === status) &&
          (tool === undefined || data.tool === tool) &&
          (runId === undefined || data.run_id === runId) &&
          (cutoff === undefined || sinceMs <= cutoff)
        );
      })
      .filter(({ ref, sinceMs }) => !cursor || sinceMs > cursor[0] || (sinceMs === cursor[0] && ref > cursor[1]))
      .sort((a, b) => a.sinceMs - b.sinceMs || (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0));
    const { page, next } = pageOf(items, limit, (last) => [last.sinceMs, last.ref]);
    return {
      items: page.map(({ entry, ref }) => {
        const data = entry.data;
        return {
          operation_ref: ref,
          tool: String(data.tool),
          run_id: String(data.run_id),
          status: entry.key as StepStatus,
          since: String(data.since),
          attempt: Number(data.attempt),
          attempts_used: Number(data.attempts_used),
          side_effect: String(data.side_effect),
          reason: String(data.reason),
          ...(typeof data.verification_tool === 'string' ? { verification_tool: data.verification_tool } : {}),
          revision: entry.revision,
        };
      }),
      ...next,
      as_of_position: head,
    };
  }

  /** Every operation of the tenant, oldest in its status first, by state, tool, run and age (docs/contract.md §5). */
  operations(caller: Caller, query: StepListQuery): Promise<RecoveryAnswer> {
    return this.listSteps(caller, query, STEP_STATUSES);
  }

  private async listSteps(
    caller: Caller,
    query: StepListQuery,
    statuses: readonly StepStatus[],
  ): Promise<RecoveryAnswer> {
    const { olderThanMs, tool, runId, status, limit, cursor, refContains, has, newest = false } = query;
    const asOf = await this.waitIfAsked(query, 'step_state');
    const where: Condition[] = [
      { column: 'tenant', op: '=', value: caller.tenant },
      { column: 'status', op: 'in', values: status ? [status] : statuses },
    ];
    if (tool !== undefined) where.push({ column: 'tool', op: '=', value: tool });
    if (runId !== undefined) where.push({ column: 'run_id', op: '=', value: runId });
    // Age is judged by the ledger's clock, never the client's (docs/contract.md §4).
    if (olderThanMs !== undefined)
      where.push({ column: 'since_ms', op: '<=', value: this.clock.now().getTime() - olderThanMs });
    if (refContains !== undefined) where.push({ column: 'operation_ref', op: 'contains', value: refContains });
    if (has !== undefined) where.push({ column: has, op: '>', value: 0 });
    if (cursor) where.push({ columns: ['since_ms', 'key'], op: newest ? '<' : '>', values: cursor });
    const rows = this.readModel.select<StepStateDoc>('step_state', {
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

  /**
   * The triage queue (docs/contract.md §5): what needs a person now, newest first, with counts per
   * kind, tool and reason over everything that matches. Judged at the ledger's clock; the timed
   * kinds use the query's thresholds; a dispatch is judged by its plan's own `dispatch_timeout_ms`
   * unless the query names one.
   */
  async triage(caller: Caller, query: TriageQuery, held: HeldRefs = async () => new Set()): Promise<TriageAnswer> {
    const { kind, tool, runId, reason, refContains, olderThanMs, limit, cursor } = query;
    const thresholds = {
      unknown_after_ms: query.unknownAfterMs ?? DEFAULT_TRIAGE_THRESHOLDS.unknown_after_ms,
      dispatch_timeout_ms: query.dispatchTimeoutMs ?? DEFAULT_TRIAGE_THRESHOLDS.dispatch_timeout_ms,
      dispatch_timeout_asked: query.dispatchTimeoutMs !== undefined,
      retry_grace_ms: query.retryGraceMs ?? DEFAULT_TRIAGE_THRESHOLDS.retry_grace_ms,
      input_after_ms: query.inputAfterMs ?? DEFAULT_TRIAGE_THRESHOLDS.input_after_ms,
    };
    const asOf = await this.waitIfAsked(query, 'step_state');
    const now = this.clock.now();
    const filters: Condition[] = [];
    if (tool !== undefined) filters.push({ column: 'tool', op: '=', value: tool });
    if (runId !== undefined) filters.push({ column: 'run_id', op: '=', value: runId });
    if (refContains !== undefined) filters.push({ column: 'operation_ref', op: 'contains', value: refContains });
    if (olderThanMs !== undefined) filters.push({ column: 'since_ms', op: '<=', value: now.getTime() - olderThanMs });
    const tenant: Condition = { column: 'tenant', op: '=', value: caller.tenant };
    // Every candidate is judged in memory: the timed kinds depend on each step's own timeout. Steps
    // in these four states, and steps that may hold a duplicate write in any state, are the
    // exceptions of a tenant, not its volume.
    const inTriageStatus = this.readModel.select<StepStateDoc>('step_state', {
      where: [tenant, { column: 'status', op: 'in', values: TRIAGE_STATUSES }, ...filters],
    });
    const possibleDuplicates = this.readModel
      .select<StepStateDoc>('step_state', {
        where: [tenant, { column: 'possible_duplicates', op: '>=', value: 1 }, ...filters],
      })
      .filter(({ doc }) => !TRIAGE_STATUSES.includes(doc.status as StepStatus));
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
      ...next,
      as_of: now.toISOString(),
      as_of_position: asOf,
    };
  }

  /** The tenant's runs, most recently changed first; `q` searches the run id, `open=true` keeps the unsettled. */
  async runs(caller: Caller, query: RunListQuery): Promise<RunListAnswer> {
    const { refContains, openOnly, limit, cursor } = query;
    const asOf = await this.waitIfAsked(query, 'run_summary');
    const where: Condition[] = [{ column: 'tenant', op: '=', value: caller.tenant }];
    if (refContains !== undefined) where.push({ column: 'run_id', op: 'contains', value: refContains });
    if (openOnly) where.push({ column: 'open', op: '>', value: 0 });
    if (cursor) where.push({ columns: ['updated_ms', 'key'], op: '<', values: cursor });
    const rows = this.readModel.select<RunSummaryDoc>('run_summary', {
      where,
      orderBy: [
        { column: 'updated_ms', descending: true },
        { column: 'key', descending: true },
      ],
      limit: limit + 1,
    });
    const { page, next } = pageOf(rows, limit, (last) => [instantMs(last.doc.updated_at), last.key]);
    return {
      runs: page.map(({ doc }) => ({
        run_id: doc.run_id,
        total: doc.total,
        open: doc.open,
        counts: doc.counts,
        started_at: doc.started_at,
        updated_at: doc.updated_at,
      })),
      ...next,
      as_of_position: asOf,
    };
  }

  /**
   * A long poll for readers that show live lists: answers as soon as every projection has applied
   * the log past `after`, or with `changed: false` when `wait_ms` ran out. The console follows the
   * log with it, so a page updates without a reload and without a key in any URL.
   */
  async changes({ after, waitMs }: ChangesQuery): Promise<ChangesAnswer> {
    const changed = await this.engine.waitForPosition(after + 1, waitMs);
    return { position: this.engine.position(), changed, as_of: this.clock.now().toISOString() };
  }

  async trust(caller: Caller, query: TrustQuery): Promise<TrustAnswer> {
    const { tool, limit, afterTool } = query;
    const asOf = await this.waitIfAsked(query, 'trust_metrics');
    const docs = this.trustDocs(caller.tenant);
    const listed = docs
      .filter((doc) => (tool === undefined || doc.tool === tool) && (afterTool === undefined || doc.tool > afterTool))
      .sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
    const { page, next } = pageOf(listed, limit, (last) => [last.tool]);
    return {
      // Overall is over every tool of the tenant, whatever page or filter is asked.
      overall: { ...trustReport(docs), tools: docs.length },
      tools: page.map((doc) => ({ tool: doc.tool, ...trustReport([doc]) })),
      ...next,
      as_of_position: asOf,
    };
  }

  /** Every tool's trust document, of one tenant or of all (the Prometheus collector's view). */
  trustDocs(tenant?: string): TrustMetricsDoc[] {
    const where: Condition[] = tenant === undefined ? [] : [{ column: 'tenant', op: '=', value: tenant }];
    return this.readModel
      .select<TrustMetricsDoc>('trust_metrics', { where, orderBy: [{ column: 'key' }] })
      .map((row) => row.doc);
  }

  private async waitIfAsked(asked: ReadPosition, projection: string): Promise<number> {
    if (this.sources.servable && !this.sources.servable()) {
      throw new LedgerProblem(
        'PROJECTION_LAGGING',
        'the read models are being checked against the log (or rebuilt from it) and are not served until they agree',
        {
          retryAfterSeconds: 1,
        },
      );
    }
    const position = asked.waitForPosition;
    const timeoutMs = asked.waitTimeoutMs ?? this.settings.defaultWaitMs;
    if (position !== undefined && !(await this.engine.waitForPosition(position, timeoutMs, [projection]))) {
      throw new LedgerProblem(
        'PROJECTION_LAGGING',
        `the ${projection} projection is at position ${this.engine.checkpoint(projection)}, not yet ${position}`,
        { retryAfterSeconds: 1 },
      );
    }
    return this.engine.checkpoint(projection);
  }
}
