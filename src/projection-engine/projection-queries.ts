import {
  evidenceOf,
  instantMs,
  pageOf,
  RECOVERY_STATUSES,
  runList,
  runOf,
  stepList,
  triageOf,
  trustDocs,
  trustOf,
  type EvidenceAnswer,
  type EvidenceQuery,
  type HeldRefs,
  type QueryScope,
  type ReadPosition,
  type RecoveryAnswer,
  type RecoveryQuery,
  type RunAnswer,
  type RunListAnswer,
  type RunListQuery,
  type RunQuery,
  type StepListQuery,
  type TriageAnswer,
  type TriageQuery,
  type TrustAnswer,
  type TrustMetricsDoc,
  type TrustQuery,
} from '@recovery-ledger/projections';
import { LedgerProblem, STEP_STATUSES, type StepStatus } from '@recovery-ledger/core';
import type { Caller } from '../auth/caller';
import type { Clock } from '../shared/clock';
import type { EventStore, IndexedStream } from '../store/event-store.port';
import { operationStream, parseOperationStream } from '../store/stream-names';
import type { ProjectionRunner } from './projection-runner';
import type { ReadModel } from '../store/read-model.port';

export interface ProjectionQuerySettings {
  /** How long `wait_for_position` waits when the request names no `wait_timeout_ms`. */
  defaultWaitMs: number;
  maxWaitMs: number;
}

export const DEFAULT_QUERY_SETTINGS: ProjectionQuerySettings = { defaultWaitMs: 5_000, maxWaitMs: 30_000 };

export interface ChangesQuery {
  after: number;
  waitMs: number;
}

export interface ChangesAnswer {
  /** The position every projection has reached. */
  position: number;
  /** Whether it moved past `after` before the wait ended. */
  changed: boolean;
  as_of: string;
}

/**
 * The readers' side (docs/contract.md §5, §9): each read model's queries (projections/, beside its
 * fold) asked for the caller's tenant. With `wait_for_position` a read first waits until its
 * projection has applied the log that far (read-your-writes), and answers 503 PROJECTION_LAGGING
 * when it has not in time.
 */
export interface QuerySources {
  /** The log, for the recovery listing (from the store's index, committed with the events). */
  store?: EventStore;
  /**
   * False for a projection while the read models are being checked against the log, or while it is
   * rebuilt because it was found to differ: it is not served from then until it agrees.
   */
  servable?: (projection: string) => boolean;
}

export class ProjectionQueries {
  constructor(
    private readonly engine: ProjectionRunner,
    private readonly readModel: ReadModel,
    private readonly clock: Clock,
    readonly settings: ProjectionQuerySettings = DEFAULT_QUERY_SETTINGS,
    private readonly sources: QuerySources = {},
  ) {}

  async evidence(caller: Caller, query: EvidenceQuery): Promise<EvidenceAnswer> {
    return evidenceOf(await this.scope(caller, query, 'evidence_trail'), query);
  }

  async run(caller: Caller, query: RunQuery): Promise<RunAnswer> {
    return runOf(await this.scope(caller, query, 'run_summary'), query);
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
    return stepList(await this.scope(caller, query, 'step_state'), query, statuses);
  }

  /** The triage queue (docs/contract.md §5): what needs a person now. */
  async triage(caller: Caller, query: TriageQuery, held: HeldRefs = async () => new Set()): Promise<TriageAnswer> {
    return triageOf(await this.scope(caller, query, 'step_state'), query, held);
  }

  /** The tenant's runs, most recently changed first; `q` searches the run id, `open=true` keeps the unsettled. */
  async runs(caller: Caller, query: RunListQuery): Promise<RunListAnswer> {
    return runList(await this.scope(caller, query, 'run_summary'), query);
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
    return trustOf(await this.scope(caller, query, 'trust_metrics'), query);
  }

  /** Every tool's trust document, of one tenant or of all (the Prometheus collector's view). */
  trustDocs(tenant?: string): TrustMetricsDoc[] {
    return trustDocs(this.readModel, tenant);
  }

  /** Where a read of `projection` answers from, once it may (see waitIfAsked). */
  private async scope(caller: Caller, asked: ReadPosition, projection: string): Promise<QueryScope> {
    const asOf = await this.waitIfAsked(asked, projection);
    return { readModel: this.readModel, tenant: caller.tenant, asOf, clock: this.clock };
  }

  private async waitIfAsked(asked: ReadPosition, projection: string): Promise<number> {
    if (this.sources.servable && !this.sources.servable(projection)) {
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
