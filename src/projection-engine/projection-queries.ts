import type { EvidenceEntry, EvidenceTrailDoc, Verdict } from '../../projections/evidence-trail.projection';
import { instantMs, scopedKey } from '../../projections/projection';
import type { RunStep, RunSummaryDoc } from '../../projections/run-summary.projection';
import type { StepStateDoc } from '../../projections/step-state.projection';
import {
  compareTriage,
  countTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  TRIAGE_KINDS,
  triageItemOf,
  type TriageCounts,
  type TriageItem,
} from '../../projections/triage';
import { trustReport, type TrustMetricsDoc, type TrustReport } from '../../projections/trust-metrics.projection';
import { STEP_STATUSES, type StepStatus } from '../domain/events';
import { LedgerError } from '../errors/ledger-error';
import type { Caller } from '../auth/caller';
import { checkOperationRef, optionalInteger } from '../http/operation-ref';
import type { Clock } from '../ledger/clock';
import type { EventStore, IndexedStream } from '../store/event-store.port';
import { operationStream, parseOperationStream } from '../store/stream-names';
import { decodeCursor, encodeCursor } from './page-cursor';
import type { ProjectionEngine } from './projection-engine';
import type { Condition, SqliteReadModel } from './sqlite-read-model.store';

export type QueryParams = Record<string, string | string[] | undefined>;

export interface ProjectionQuerySettings {
  /** How long `wait_for_position` waits when the request names no `wait_timeout_ms`. */
  defaultWaitMs: number;
  maxWaitMs: number;
}

export const DEFAULT_QUERY_SETTINGS: ProjectionQuerySettings = { defaultWaitMs: 5_000, maxWaitMs: 30_000 };

export interface EvidenceAnswer {
  operation_ref: string;
  run_id?: string;
  tool?: string;
  side_effect?: string;
  status: string;
  revision: number;
  verdict: Verdict;
  entries: EvidenceEntry[];
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
  thresholds: { unknown_after_ms: number; dispatch_timeout_ms: number };
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
const TRIAGE_STATUSES: readonly StepStatus[] = ['escalated', 'awaiting_approval', 'verifying', 'dispatched'];
const MAX_THRESHOLD_MS = 30 * 86_400_000;
const RECOVERY_STATUSES: readonly StepStatus[] = ['dispatched', 'verifying'];
/** `has=` on the operations list: the operations a trust figure counts (a step_state column each). */
export const TRUST_FLAGS = [
  'unknown_outcomes',
  'resolved_by_lookup',
  'duplicates_prevented',
  'identical_retries_blocked',
  'unverified_dispatches_refused',
] as const;
const IDENTIFIER_PATTERN = /^[^\u0000-\u001f\u007f]{1,200}$/u;

function single(params: QueryParams, name: string): string | undefined {
  const value = params[name];
  if (Array.isArray(value)) throw new LedgerError('BAD_REQUEST', `${name} may be given once`, { field: name });
  return value;
}

function identifier(raw: string | undefined, field: string): string | undefined {
  if (raw === undefined) return undefined;
  if (!IDENTIFIER_PATTERN.test(raw) || raw.trim().length === 0) {
    throw new LedgerError('BAD_REQUEST', `${field} must be 1 to 200 printable characters`, { field });
  }
  return raw;
}

function oneOf<T extends string>(raw: string | undefined, allowed: readonly T[], field: string): T | undefined {
  if (raw === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new LedgerError('BAD_REQUEST', `${field} must be one of ${allowed.join(', ')}`, { field });
  }
  return raw as T;
}

function pageLimit(params: QueryParams, fallback: number, max: number): number {
  return optionalInteger(single(params, 'limit'), 'limit', 1, max) ?? fallback;
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

export class ProjectionQueries {
  constructor(
    private readonly engine: ProjectionEngine,
    private readonly readModel: SqliteReadModel,
    private readonly clock: Clock,
    private readonly settings: ProjectionQuerySettings = DEFAULT_QUERY_SETTINGS,
    private readonly sources: QuerySources = {},
  ) {}

  async evidence(caller: Caller, ref: string, params: QueryParams = {}): Promise<EvidenceAnswer> {
    const operationRef = checkOperationRef(ref);
    const limit = pageLimit(params, 500, 1000);
    const [afterRevision] = (decodeCursor(single(params, 'cursor'), ['number']) ?? [-1]) as number[];
    const asOf = await this.waitIfAsked(params, 'evidence_trail');
    const doc = this.readModel.getDoc<EvidenceTrailDoc>('evidence_trail', scopedKey(caller.tenant, operationRef));
    if (!doc) throw new LedgerError('OPERATION_NOT_FOUND', 'the operation has no events (or they are not projected yet: see wait_for_position)');
    const after = doc.entries.filter((entry) => entry.revision > afterRevision);
    const entries = after.slice(0, limit);
    return {
      operation_ref: operationRef,
      ...(doc.run_id === undefined ? {} : { run_id: doc.run_id }),
      ...(doc.tool === undefined ? {} : { tool: doc.tool }),
      ...(doc.side_effect === undefined ? {} : { side_effect: doc.side_effect }),
      status: doc.status,
      revision: doc.revision,
      verdict: doc.verdict,
      entries,
      ...(after.length > limit ? { next_cursor: encodeCursor([entries[entries.length - 1].revision]) } : {}),
      as_of_position: asOf,
    };
  }

  async run(caller: Caller, runIdRaw: string, params: QueryParams = {}): Promise<RunAnswer> {
    const runId = identifier(runIdRaw, 'run_id') as string;
    const status = oneOf(single(params, 'status'), ['unplanned', ...STEP_STATUSES], 'status');
    const tool = identifier(single(params, 'tool'), 'tool');
    const limit = pageLimit(params, 500, 1000);
    const [afterPlanned] = (decodeCursor(single(params, 'cursor'), ['number']) ?? [0]) as number[];
    const asOf = await this.waitIfAsked(params, 'run_summary');
    const doc = this.readModel.getDoc<RunSummaryDoc>('run_summary', scopedKey(caller.tenant, runId));
    if (!doc) throw new LedgerError('RUN_NOT_FOUND', 'no step of this run is planned (or projected yet: see wait_for_position)');
    const matching = Object.values(doc.steps)
      .filter((step) => step.planned_position > afterPlanned)
      .filter((step) => (status === undefined || step.status === status) && (tool === undefined || step.tool === tool))
      .sort((a, b) => a.planned_position - b.planned_position);
    const steps = matching.slice(0, limit);
    return {
      run_id: doc.run_id,
      total: doc.total,
      open: doc.open,
      counts: doc.counts,
      started_at: doc.started_at,
      updated_at: doc.updated_at,
      steps,
      ...(matching.length > limit ? { next_cursor: encodeCursor([steps[steps.length - 1].planned_position]) } : {}),
      as_of_position: asOf,
    };
  }

  /** Operations in flight or verifying, oldest first: what a restarted worker must verify (docs/contract.md §4). */
  async recovery(caller: Caller, params: QueryParams = {}): Promise<RecoveryAnswer> {
    const store = this.sources.store;
    if (!store) return this.listSteps(caller, params, RECOVERY_STATUSES);
    // The head first: the index read after it covers at least the log up to there.
    const head = await store.headPosition();
    const indexed = await store.indexedStreams(operationStream(caller.tenant, ''), RECOVERY_STATUSES);
    if (indexed) return this.recoveryFromIndex(indexed, params, head);
    // A store without an index: the projection, but only once it has applied the log up to the
    // head read at this request, so nothing in doubt at the time of the request is left out.
    const asked = single(params, 'wait_for_position');
    return this.listSteps(caller, asked === undefined ? { ...params, wait_for_position: String(head) } : params, RECOVERY_STATUSES);
  }

  /** The recovery listing from the store's index: consistent with the log, whatever the read model holds. */
  private recoveryFromIndex(indexed: IndexedStream[], params: QueryParams, head: number): RecoveryAnswer {
    const olderThanMs = optionalInteger(single(params, 'older_than_ms'), 'older_than_ms', 0, 10 * 365 * 86_400_000);
    const tool = identifier(single(params, 'tool'), 'tool');
    const runId = identifier(single(params, 'run_id'), 'run_id');
    const status = oneOf(single(params, 'status'), RECOVERY_STATUSES, 'status');
    const limit = pageLimit(params, 100, 1000);
    const cursor = decodeCursor(single(params, 'cursor'), ['number', 'string']) as [number, string] | undefined;
    optionalInteger(single(params, 'wait_for_position'), 'wait_for_position', 0, Number.MAX_SAFE_INTEGER);
    optionalInteger(single(params, 'wait_timeout_ms'), 'wait_timeout_ms', 0, this.settings.maxWaitMs);
    const cutoff = olderThanMs === undefined ? undefined : this.clock.now().getTime() - olderThanMs;
    const items = indexed
      .map((entry) => ({ entry, ref: parseOperationStream(entry.stream)?.operationRef ?? '', sinceMs: instantMs(String(entry.data.since)) }))
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
    const page = items.slice(0, limit);
    const last = page[page.length - 1];
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
      ...(items.length > limit ? { next_cursor: encodeCursor([last.sinceMs, last.ref]) } : {}),
      as_of_position: head,
    };
  }

  /** Every operation of the tenant, oldest in its status first, by state, tool, run and age (docs/contract.md §5). */
  operations(caller: Caller, params: QueryParams = {}): Promise<RecoveryAnswer> {
    return this.listSteps(caller, params, STEP_STATUSES);
  }

  private async listSteps(caller: Caller, params: QueryParams, statuses: readonly StepStatus[]): Promise<RecoveryAnswer> {
    const olderThanMs = optionalInteger(single(params, 'older_than_ms'), 'older_than_ms', 0, 10 * 365 * 86_400_000);
    const tool = identifier(single(params, 'tool'), 'tool');
    const runId = identifier(single(params, 'run_id'), 'run_id');
    const status = oneOf(single(params, 'status'), statuses, 'status');
    const limit = pageLimit(params, 100, 1000);
    const cursor = decodeCursor(single(params, 'cursor'), ['number', 'string']);
    const asOf = await this.waitIfAsked(params, 'step_state');
    const where: Condition[] = [
      { column: 'tenant', op: '=', value: caller.tenant },
      { column: 'status', op: 'in', values: status ? [status] : statuses },
    ];
    if (tool !== undefined) where.push({ column: 'tool', op: '=', value: tool });
    if (runId !== undefined) where.push({ column: 'run_id', op: '=', value: runId });
    // Age is judged by the ledger's clock, never the client's (docs/contract.md §4).
    if (olderThanMs !== undefined) where.push({ column: 'since_ms', op: '<=', value: this.clock.now().getTime() - olderThanMs });
    const refContains = identifier(single(params, 'q'), 'q');
    if (refContains !== undefined) where.push({ column: 'operation_ref', op: 'contains', value: refContains });
    const has = oneOf(single(params, 'has'), TRUST_FLAGS, 'has');
    if (has !== undefined) where.push({ column: has, op: '>', value: 0 });
    const newest = oneOf(single(params, 'order'), ['oldest', 'newest'], 'order') === 'newest';
    if (cursor) where.push({ columns: ['since_ms', 'key'], op: newest ? '<' : '>', values: cursor });
    const rows = this.readModel.select<StepStateDoc>('step_state', {
      where,
      orderBy: [
        { column: 'since_ms', descending: newest },
        { column: 'key', descending: newest },
      ],
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
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
      ...(rows.length > limit ? { next_cursor: encodeCursor([instantMs(last.doc.since), last.key]) } : {}),
      as_of_position: asOf,
    };
  }

  /**
   * The triage queue (docs/contract.md §5): what needs a person now, newest first, with counts per
   * kind, tool and reason over everything that matches. Judged at the ledger's clock; the timed
   * kinds use the query's thresholds; a dispatch is judged by its plan's own `dispatch_timeout_ms`
   * unless the query names one.
   */
  async triage(caller: Caller, params: QueryParams = {}): Promise<TriageAnswer> {
    const kind = oneOf(single(params, 'kind'), TRIAGE_KINDS, 'kind');
    const tool = identifier(single(params, 'tool'), 'tool');
    const runId = identifier(single(params, 'run_id'), 'run_id');
    const reason = identifier(single(params, 'reason'), 'reason');
    const refContains = identifier(single(params, 'q'), 'q');
    const olderThanMs = optionalInteger(single(params, 'older_than_ms'), 'older_than_ms', 0, 10 * 365 * 86_400_000);
    const askedDispatchTimeout = optionalInteger(single(params, 'dispatch_timeout_ms'), 'dispatch_timeout_ms', 0, MAX_THRESHOLD_MS);
    const thresholds = {
      unknown_after_ms:
        optionalInteger(single(params, 'unknown_after_ms'), 'unknown_after_ms', 0, MAX_THRESHOLD_MS) ?? DEFAULT_TRIAGE_THRESHOLDS.unknown_after_ms,
      dispatch_timeout_ms: askedDispatchTimeout ?? DEFAULT_TRIAGE_THRESHOLDS.dispatch_timeout_ms,
      dispatch_timeout_asked: askedDispatchTimeout !== undefined,
    };
    const limit = pageLimit(params, 50, 500);
    const cursor = decodeCursor(single(params, 'cursor'), ['number', 'string']) as [number, string] | undefined;
    const asOf = await this.waitIfAsked(params, 'step_state');
    const now = this.clock.now();
    const where: Condition[] = [
      { column: 'tenant', op: '=', value: caller.tenant },
      { column: 'status', op: 'in', values: TRIAGE_STATUSES },
    ];
    if (tool !== undefined) where.push({ column: 'tool', op: '=', value: tool });
    if (runId !== undefined) where.push({ column: 'run_id', op: '=', value: runId });
    if (refContains !== undefined) where.push({ column: 'operation_ref', op: 'contains', value: refContains });
    if (olderThanMs !== undefined) where.push({ column: 'since_ms', op: '<=', value: now.getTime() - olderThanMs });
    // Every candidate is judged in memory: the timed kinds depend on each step's own timeout. Steps
    // in these four states are the exceptions of a tenant, not its volume.
    const matching = this.readModel
      .select<StepStateDoc>('step_state', { where })
      .map(({ doc }) => triageItemOf(doc, now.getTime(), thresholds))
      .filter((item): item is TriageItem => item !== undefined)
      .filter((item) => (kind === undefined || item.kind === kind) && (reason === undefined || item.reason === reason))
      .sort(compareTriage);
    const after = cursor
      ? matching.filter((item) => {
          const since = instantMs(item.since);
          return since < cursor[0] || (since === cursor[0] && item.operation_ref > cursor[1]);
        })
      : matching;
    const items = after.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items,
      counts: countTriage(matching),
      thresholds: { unknown_after_ms: thresholds.unknown_after_ms, dispatch_timeout_ms: thresholds.dispatch_timeout_ms },
      ...(after.length > limit ? { next_cursor: encodeCursor([instantMs(last.since), last.operation_ref]) } : {}),
      as_of: now.toISOString(),
      as_of_position: asOf,
    };
  }

  /** The tenant's runs, most recently changed first; `q` searches the run id, `open=true` keeps the unsettled. */
  async runs(caller: Caller, params: QueryParams = {}): Promise<RunListAnswer> {
    const refContains = identifier(single(params, 'q'), 'q');
    const openOnly = oneOf(single(params, 'open'), ['true', 'false'], 'open') === 'true';
    const limit = pageLimit(params, 50, 500);
    const cursor = decodeCursor(single(params, 'cursor'), ['number', 'string']);
    const asOf = await this.waitIfAsked(params, 'run_summary');
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
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      runs: page.map(({ doc }) => ({
        run_id: doc.run_id,
        total: doc.total,
        open: doc.open,
        counts: doc.counts,
        started_at: doc.started_at,
        updated_at: doc.updated_at,
      })),
      ...(rows.length > limit ? { next_cursor: encodeCursor([instantMs(last.doc.updated_at), last.key]) } : {}),
      as_of_position: asOf,
    };
  }

  /**
   * A long poll for readers that show live lists: answers as soon as every projection has applied
   * the log past `after`, or with `changed: false` when `wait_ms` ran out. The console follows the
   * log with it, so a page updates without a reload and without a key in any URL.
   */
  async changes(params: QueryParams = {}): Promise<ChangesAnswer> {
    const after = optionalInteger(single(params, 'after'), 'after', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    const waitMs = optionalInteger(single(params, 'wait_ms'), 'wait_ms', 0, this.settings.maxWaitMs) ?? 0;
    const changed = await this.engine.waitForPosition(after + 1, waitMs);
    return { position: this.engine.position(), changed, as_of: this.clock.now().toISOString() };
  }

  async trust(caller: Caller, params: QueryParams = {}): Promise<TrustAnswer> {
    const tool = identifier(single(params, 'tool'), 'tool');
    const limit = pageLimit(params, 100, 1000);
    const [afterTool] = (decodeCursor(single(params, 'cursor'), ['string']) ?? []) as string[];
    const asOf = await this.waitIfAsked(params, 'trust_metrics');
    const docs = this.trustDocs(caller.tenant);
    const listed = docs
      .filter((doc) => (tool === undefined || doc.tool === tool) && (afterTool === undefined || doc.tool > afterTool))
      .sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
    const page = listed.slice(0, limit);
    return {
      // Overall is over every tool of the tenant, whatever page or filter is asked.
      overall: { ...trustReport(docs), tools: docs.length },
      tools: page.map((doc) => ({ tool: doc.tool, ...trustReport([doc]) })),
      ...(listed.length > limit ? { next_cursor: encodeCursor([page[page.length - 1].tool]) } : {}),
      as_of_position: asOf,
    };
  }

  /** Every tool's trust document, of one tenant or of all (the Prometheus collector's view). */
  trustDocs(tenant?: string): TrustMetricsDoc[] {
    const where: Condition[] = tenant === undefined ? [] : [{ column: 'tenant', op: '=', value: tenant }];
    return this.readModel.select<TrustMetricsDoc>('trust_metrics', { where, orderBy: [{ column: 'key' }] }).map((row) => row.doc);
  }

  private async waitIfAsked(params: QueryParams, projection: string): Promise<number> {
    if (this.sources.servable && !this.sources.servable()) {
      throw new LedgerError('PROJECTION_LAGGING', 'the read models are being checked against the log (or rebuilt from it) and are not served until they agree', {
        retryAfterSeconds: 1,
      });
    }
    const position = optionalInteger(single(params, 'wait_for_position'), 'wait_for_position', 0, Number.MAX_SAFE_INTEGER);
    const timeoutMs =
      optionalInteger(single(params, 'wait_timeout_ms'), 'wait_timeout_ms', 0, this.settings.maxWaitMs) ?? this.settings.defaultWaitMs;
    if (position !== undefined && !(await this.engine.waitForPosition(position, timeoutMs, [projection]))) {
      throw new LedgerError(
        'PROJECTION_LAGGING',
        `the ${projection} projection is at position ${this.engine.checkpoint(projection)}, not yet ${position}`,
        { retryAfterSeconds: 1 },
      );
    }
    return this.engine.checkpoint(projection);
  }
}
