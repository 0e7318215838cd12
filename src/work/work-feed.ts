import { LRUCache } from 'lru-cache';
import { randomUUID } from 'node:crypto';
import { scopedKey } from '@recovery-ledger/projections';
import { stepDueMs } from '@recovery-ledger/projections';
import {
  canonicalJson,
  dispatchTimeoutMs,
  dueWork,
  isPlanned,
  isTerminalStatus,
  type LeaseEvidence,
  type LeaseView,
  LedgerProblem,
  type PlannedStep,
  type StepState,
  type SubmitAnswer,
  type WorkAnswer,
  type WorkItem,
  type WorkKind,
  type WorkLease,
} from '@recovery-ledger/core';
import type { Caller } from '../auth/caller';
import type { Clock } from '../shared/clock';
import { sha256Hex } from '../ledger/event-ids';
import type { LedgerService } from '../ledger/ledger.service';
import { NO_STREAM } from '../store/event-store.port';
import type { ReadModel } from '../store/read-model.port';
import { isHeld, type LeaseRecord, type LeaseStore } from '../store/lease-store.port';

export type { LeaseView, WorkAnswer, WorkItem, WorkLease };

export interface WorkFeedSettings {
  defaultLeaseMs: number;
  maxLeaseMs: number;
  maxWaitMs: number;
  /** How often a long poll looks again for due work. */
  pollMs: number;
  maxLimit: number;
}

export const DEFAULT_WORK_FEED_SETTINGS: WorkFeedSettings = {
  defaultLeaseMs: 30_000,
  maxLeaseMs: 600_000,
  maxWaitMs: 30_000,
  pollMs: 100,
  maxLimit: 100,
};

/**
 * Where the step-state read model stands, and a wait for it to move: the feed's candidates come
 * from it, so a waiting poll looks again as soon as it has moved (the projection runner).
 */
export interface WorkCandidatesClock {
  position(): number;
  /** True once the read model has reached `position`, false after `timeoutMs`. */
  waitForPosition(position: number, timeoutMs: number): Promise<boolean>;
}

export interface WorkObserver {
  /** A lease granted over one that was neither released nor renewed before it expired. */
  onLeaseExpired?(tool: string): void;
  /** An item granted to another worker than the one that held it last. */
  onHandover?(tool: string): void;
  onGranted?(tool: string, kind: WorkKind): void;
}

/** A worker's ask for work, checked at the HTTP edge (src/http/work-requests.ts). */
export interface WorkRequest {
  /** Only these tools; all when empty. */
  tools: readonly string[];
  /** The holder the leases are granted to. */
  worker: string;
  limit: number;
  /** How long to wait for an item before answering with none. */
  waitMs: number;
  leaseMs: number;
}

export interface RenewRequest {
  leaseId: string;
  /** From now; the feed's default when absent. */
  leaseMs?: number;
}

export interface ReleaseRequest {
  leaseId: string;
  /** Keep the item from everyone this long after the release. */
  holdMs?: number;
}

/** Who asks for work, for which tools, and for how long a lease: what every look hands out under. */
interface Asking {
  tenant: string;
  tools: readonly string[];
  worker: string;
  leaseMs: number;
  /** The API key the worker authenticated with, recorded on the lease (LeaseRecord.granted_to). */
  grantedTo: string;
}

/** Why a waiting poll is woken: a step of its tenant made due now, or a commit of its tenant up to a position. */
type Wake = { fresh: true } | { position: number };

/** A step in one of these is due the moment it gets there (docs/work-feed.md, "What is due when"). */
const DUE_AT_ONCE: ReadonlySet<string> = new Set(['planned', 'retry_ready', 'verifying']);
/** Steps remembered per tenant as just made due; past that the oldest wait for the read model. */
const MAX_FRESH_PER_TENANT = 1_000;

/**
 * The work feed (docs/contract.md §4, §9): the ledger hands a worker the steps it may act on now,
 * each under a lease, so the ledger, not every runtime, owns the schedule. Candidates come from the
 * step-state read model (its `due_ms` column); each one is leased first and then judged again on
 * the step's own stream, so nothing stale is handed out and what the item says (attempt, input
 * hash, directive) is what the gate will decide on. The gate stays the hard guarantee: a worker
 * that acts on an item it no longer holds is refused there like anyone else.
 */
export class WorkFeed {
  /**
   * Steps judged not due on their own stream, with the revision judged and when they become due
   * (Infinity: never, as they stand). The read model lags the log, so a step just finished still
   * looks due there; until the read model shows a later revision or that instant passes, it is not
   * judged (and leased) again on every poll.
   */
  private readonly notDue = new LRUCache<string, { revision: number; dueMs: number }>({ max: 200_000 });

  /**
   * When a look for a tenant's tools last handed out nothing (or is under way), over how many items
   * (its limit), and at which read-model position. Every waiting poll of the same ask skips its own
   * look until the read model has moved past that position or `pollMs` has passed (work that falls
   * due by the clock alone: `not_before`, a dispatch timeout): the answer does not depend on the
   * worker, and hundreds of polls each querying the read model and the leases ten times a second
   * (their due steps all held) kept the event loop from everyone else.
   */
  private readonly emptyLooks = new LRUCache<string, { atMs: number; limit: number; position: number }>({
    max: 10_000,
  });

  /**
   * Steps a submit of this process has just made due, per tenant, with their tool: a poll tries
   * them first, before the read model shows them (under load it follows the log by tens of
   * milliseconds). Only candidates: each is leased and then judged on its own stream like any other.
   */
  private readonly fresh = new Map<string, Map<string, string>>();
  /**
   * Waiting polls by tenant, woken only by their own tenant's commits (`noteChanged`): a commit of
   * one tenant cannot change what another's look finds, and waking every poll on every commit made
   * one tenant's open polls each query the read model on every other tenant's submit.
   */
  private readonly waiters = new Map<string, Set<(wake: Wake) => void>>();
  /** The log position each tenant's last commit in this process reached: a look before it may not have seen it. */
  private readonly tenantHeads = new LRUCache<string, number>({ max: 100_000 });

  constructor(
    private readonly ledger: LedgerService,
    private readonly readModel: ReadModel,
    private readonly leases: LeaseStore,
    private readonly clock: Clock,
    private readonly observer: WorkObserver = {},
    readonly settings: WorkFeedSettings = DEFAULT_WORK_FEED_SETTINGS,
    private readonly candidates?: WorkCandidatesClock,
  ) {}

  private stopping = false;

  /** Shutdown: long polls answer at their next look instead of holding the server open. */
  stop(): void {
    this.stopping = true;
    for (const waiting of [...this.waiters.values()]) for (const wake of [...waiting]) wake({ fresh: true });
  }

  /**
   * A submit appended to `operationRef` up to log `position`, and it now stands in `state`: hand it
   * out now if it is due, and have the tenant's waiting polls look again once the read model shows it.
   */
  noteChanged(tenant: string, operationRef: string, state: StepState, position?: number): void {
    if (position !== undefined && position > (this.tenantHeads.get(tenant) ?? 0))
      this.tenantHeads.set(tenant, position);
    const due = isPlanned(state) && DUE_AT_ONCE.has(state.status);
    if (due) {
      let refs = this.fresh.get(tenant);
      if (!refs) this.fresh.set(tenant, (refs = new Map()));
      refs.delete(operationRef);
      refs.set(operationRef, state.definition.tool);
      if (refs.size > MAX_FRESH_PER_TENANT) refs.delete(refs.keys().next().value as string);
    }
    const waiting = this.waiters.get(tenant);
    if (!waiting) return;
    for (const wake of [...waiting]) wake(due ? { fresh: true } : { position: position ?? 0 });
  }

  private key(tenant: string, operationRef: string): string {
    return scopedKey(tenant, operationRef);
  }

  async take(caller: Caller, request: WorkRequest, closed?: () => boolean): Promise<WorkAnswer> {
    // On a rolled-back log the read model can show work the log has lost track of: no lease is taken.
    const refusal = this.ledger.writeRefusal();
    if (refusal) throw refusal;
    const { tools, worker, limit, waitMs, leaseMs } = request;
    const asking: Asking = { tenant: caller.tenant, tools, worker, leaseMs, grantedTo: caller.actor };
    const deadline = this.clock.now().getTime() + waitMs;
    const ask = [caller.tenant, ...[...tools].sort()].join('\u0000');
    // Every request looks once; only a waiting poll's further looks are shared (emptyLooks).
    for (let first = true; ; first = false) {
      if (closed?.() || this.stopping) return { items: [] };
      const empty = this.emptyLooks.get(ask);
      const lookedMs = this.clock.now().getTime();
      const position = this.candidates?.position() ?? 0;
      const items = await this.handOutFresh(asking, limit);
      if (
        items.length < limit &&
        (first ||
          !empty ||
          empty.limit < limit ||
          position > empty.position ||
          lookedMs - empty.atMs >= this.settings.pollMs ||
          lookedMs < empty.atMs)
      ) {
        // Marked before looking: polls woken by the same move of the read model wait for this look.
        this.emptyLooks.set(ask, { atMs: lookedMs, limit, position });
        const looked = await this.handOut(asking, limit - items.length);
        if (looked.length > 0) this.emptyLooks.delete(ask);
        items.push(...looked);
      }
      if (items.length > 0 && closed?.()) {
        // The worker went away (stopped, or cut its poll short): no one will ever get these leases,
        // so give them back now rather than leave the items unattended until they expire.
        await Promise.all(
          items.map((item) =>
            this.leases.release(this.key(caller.tenant, item.operation_ref), item.lease.id, this.clock.now().getTime()),
          ),
        );
        return { items: [] };
      }
      if (items.length > 0 || this.clock.now().getTime() >= deadline || this.stopping) return { items };
      const waitMs = Math.min(this.settings.pollMs, Math.max(1, deadline - this.clock.now().getTime()));
      // A step planned (or moved) just after this look shows in the read model first: look again
      // as soon as it has moved, not a whole pollMs later (docs/work-feed.md, "Long polls").
      await this.waitForWork(caller.tenant, position, waitMs);
    }
  }

  /**
   * Until a commit of the tenant reaches the read model, a submit of the tenant makes a step due,
   * or `waitMs` passes (work due by the clock alone, or committed by another process on the log).
   */
  private waitForWork(tenant: string, position: number, waitMs: number): Promise<void> {
    return new Promise((resolve) => {
      let waiting = this.waiters.get(tenant);
      if (!waiting) this.waiters.set(tenant, (waiting = new Set()));
      const set = waiting;
      const until = performance.now() + waitMs;
      const timer = setTimeout(() => done(), waitMs);
      const done = () => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0 && this.waiters.get(tenant) === set) this.waiters.delete(tenant);
        resolve();
      };
      const showing = (reached: number) => {
        set.delete(wake);
        const left = until - performance.now();
        if (!this.candidates || left <= 0) return done();
        this.candidates.waitForPosition(reached, left).then(done, done);
      };
      function wake(how: Wake) {
        if ('fresh' in how) done();
        else showing(how.position);
      }
      // A commit of the tenant after the read model position the look saw: look once it shows it.
      const head = this.tenantHeads.get(tenant) ?? 0;
      if (head > position) showing(head);
      else set.add(wake);
    });
  }

  /** The steps just made due for these tools (`noteChanged`), each leased and judged on its stream. */
  private async handOutFresh(asking: Asking, limit: number): Promise<WorkItem[]> {
    const { tenant, tools } = asking;
    const refs = this.fresh.get(tenant);
    const items: WorkItem[] = [];
    if (!refs) return items;
    for (const [operationRef, tool] of refs) {
      if (items.length >= limit) break;
      if (tools.length > 0 && !tools.includes(tool)) continue;
      // Tried once: a step held, or not due after all, is the read model's to offer from here on.
      refs.delete(operationRef);
      const item = await this.tryHandOut(asking, this.key(tenant, operationRef), operationRef);
      if (item) items.push(item);
    }
    if (refs.size === 0) this.fresh.delete(tenant);
    return items;
  }

  private async handOut(asking: Asking, limit: number): Promise<WorkItem[]> {
    const { tenant, tools } = asking;
    const nowMs = this.clock.now().getTime();
    // Held items sit among the due ones until their lease ends: look past them, within reason.
    const rows = this.readModel.dueSteps({ tenant, tools, nowMs, limit: limit * 2 + 100 });
    const keys = rows.map((row) => row.key);
    const held = await this.leases.getMany(keys);
    const items: WorkItem[] = [];
    for (const row of rows) {
      if (items.length >= limit) break;
      const key = row.key;
      if (isHeld(held.get(key), nowMs)) continue;
      const judged = this.notDue.get(key);
      if (judged && judged.revision >= row.revision && nowMs < judged.dueMs) continue;
      const item = await this.tryHandOut(asking, key, row.operationRef);
      if (item) items.push(item);
    }
    return items;
  }

  private async tryHandOut(asking: Asking, key: string, operationRef: string): Promise<WorkItem | undefined> {
    const { tenant, worker, leaseMs, grantedTo } = asking;
    const granted = await this.leases.acquire({
      key,
      leaseId: randomUUID(),
      holder: worker,
      grantedTo,
      nowMs: this.clock.now().getTime(),
      ttlMs: leaseMs,
    });
    if (!granted.granted) return undefined;
    const lease = granted.lease;
    let item: WorkItem | { notDue: { revision: number; dueMs: number } };
    try {
      item = await this.judge(tenant, operationRef, lease);
    } catch (error) {
      await this.leases.release(key, lease.lease_id, this.clock.now().getTime()).catch(() => undefined);
      throw error;
    }
    if ('notDue' in item) {
      // The read model was behind the stream: the step has moved on. Nobody needs the lease.
      this.notDue.set(key, item.notDue);
      await this.leases.release(key, lease.lease_id, this.clock.now().getTime());
      return undefined;
    }
    this.notDue.delete(key);
    if (lease.took_over) this.observer.onLeaseExpired?.(item.tool);
    if (granted.replaced && granted.replaced.holder !== worker) this.observer.onHandover?.(item.tool);
    this.observer.onGranted?.(item.tool, item.kind);
    return item;
  }

  /** The item as the step's own stream has it now, or at which revision it is not due, until when. */
  private async judge(
    tenant: string,
    operationRef: string,
    lease: LeaseRecord,
  ): Promise<WorkItem | { notDue: { revision: number; dueMs: number } }> {
    const { state: folded, revision } = await this.ledger.currentState(tenant, operationRef);
    if (!isPlanned(folded)) return { notDue: { revision, dueMs: Infinity } };
    const state: PlannedStep = folded;
    const nowMs = this.clock.now().getTime();
    const policy = state.definition.policy;
    const due = dueWork({
      status: state.status,
      operation_ref: operationRef,
      attempts_used: state.attempts_used,
      since_ms: Date.parse(state.since),
      ...(state.not_before === undefined ? {} : { not_before_ms: Date.parse(state.not_before) }),
      dispatch_timeout_ms: dispatchTimeoutMs(policy),
    });
    if (!due || due.due_ms > nowMs) return { notDue: { revision, dueMs: due ? due.due_ms : Infinity } };
    const dispatch = due.kind === 'dispatch';
    // A retry runs the input last dispatched (a corrected one, after correct_input), else the plan's.
    const inputHash = state.current_input_hash ?? state.definition.input_hash;
    const input = state.definition.input;
    const inputMatches =
      input !== undefined &&
      (inputHash === state.definition.input_hash || sha256Hex(canonicalJson(input)) === inputHash);
    return {
      operation_ref: operationRef,
      run_id: state.definition.run_id,
      tool: state.definition.tool,
      side_effect: state.definition.side_effect,
      kind: due.kind,
      status: state.status,
      directive: {
        next_action: dispatch ? 'dispatch' : 'verify_operation',
        attempts_remaining: state.directive.attempts_remaining,
      },
      attempt: dispatch ? state.attempts_used + 1 : state.current_attempt,
      input_hash: inputHash,
      ...(dispatch && inputMatches ? { input } : {}),
      ...(policy.verification_tool ? { verification_tool: policy.verification_tool } : {}),
      policy: { ...policy, dispatch_timeout_ms: dispatchTimeoutMs(policy) },
      revision,
      due_at: new Date(due.due_ms).toISOString(),
      lease: {
        id: lease.lease_id,
        holder: lease.holder,
        expires_at: new Date(lease.expires_at_ms).toISOString(),
        ...(lease.took_over ? { took_over_from: lease.took_over.holder } : {}),
      },
    };
  }

  async renew(caller: Caller, operationRef: string, request: RenewRequest): Promise<{ lease: WorkLease }> {
    await this.refuseAnotherKey(caller, operationRef, request.leaseId);
    const ttl = request.leaseMs ?? this.settings.defaultLeaseMs;
    const renewed = await this.leases.renew(
      this.key(caller.tenant, operationRef),
      request.leaseId,
      this.clock.now().getTime(),
      ttl,
    );
    if (!renewed) {
      throw new LedgerProblem(
        'LEASE_LOST',
        'this lease no longer holds the item: it was released, or it expired and another worker took the item',
      );
    }
    return {
      lease: {
        id: renewed.lease_id,
        holder: renewed.holder,
        expires_at: new Date(renewed.expires_at_ms).toISOString(),
      },
    };
  }

  async release(caller: Caller, operationRef: string, request: ReleaseRequest): Promise<{ released: boolean }> {
    await this.refuseAnotherKey(caller, operationRef, request.leaseId);
    const released = await this.leases.release(
      this.key(caller.tenant, operationRef),
      request.leaseId,
      this.clock.now().getTime(),
      request.holdMs,
    );
    return { released };
  }

  /**
   * A lease renews and releases only for the key it was granted to (docs/work-feed.md, "Lease
   * rules"): a lease id read by another key of the tenant holds nothing for it. Lease ids are never
   * reused, so the record read here is the one renew or release would change, or none of theirs.
   * Records written before keys were recorded (no `granted_to`) stay bound to their id alone.
   */
  private async refuseAnotherKey(caller: Caller, operationRef: string, leaseId: string): Promise<void> {
    const key = this.key(caller.tenant, operationRef);
    const record = (await this.leases.getMany([key])).get(key);
    if (record?.lease_id === leaseId && record.granted_to !== undefined && record.granted_to !== caller.actor) {
      throw new LedgerProblem('LEASE_LOST', 'this lease was granted to another key: it holds nothing for this one');
    }
  }

  /**
   * A submit under a lease (the `Ledger-Lease` header), as one call: the lease's evidence is read
   * and handed to `submit`, which records it with the facts; when they ended the step under the
   * lease that holds it, no attempt of the step can be granted again, so nothing the lease guards is
   * left and it is given back in the same request (docs/contract.md §9, "A lease ends with its
   * step"). A release that fails changes nothing of what was stored: the worker then releases it
   * itself, or it expires.
   */
  async submitUnderLease(
    caller: Caller,
    operationRef: string,
    leaseId: string,
    submit: (evidence: LeaseEvidenceAnswer) => Promise<SubmitAnswer>,
  ): Promise<SubmitAnswer> {
    const evidence = await this.leaseEvidence(caller, operationRef, leaseId);
    const answer = await submit(evidence);
    if (!evidence.current || !isTerminalStatus(answer.state.status)) return answer;
    try {
      const { released } = await this.release(caller, operationRef, { leaseId });
      return released ? { ...answer, lease_released: true } : answer;
    } catch {
      return answer;
    }
  }

  /**
   * The lease a fact is submitted under (the `Ledger-Lease` header), as evidence: which worker it
   * was granted to, and whether it still held the item. A stale lease does not refuse the fact:
   * an envelope is what happened, whoever reports it, and the gate judges the fact on its own.
   */
  private async leaseEvidence(caller: Caller, operationRef: string, id: string): Promise<LeaseEvidenceAnswer> {
    const key = this.key(caller.tenant, operationRef);
    const record = (await this.leases.getMany([key])).get(key);
    if (record?.lease_id === id) {
      return {
        lease_id: id,
        holder: record.holder,
        current: !record.released,
        ...(record.took_over ? { took_over_from: record.took_over.holder } : {}),
        ...(record.released ? {} : { expires_at: new Date(record.expires_at_ms).toISOString() }),
      };
    }
    if (record?.previous?.lease_id === id) return { lease_id: id, holder: record.previous.holder, current: false };
    return { lease_id: id, holder: 'unknown', current: false };
  }

  /**
   * Who holds an operation now, for people reading the tenant (the console). The lease id is left
   * out: renew and release need nothing else, so it is the holder's capability, not a reader's.
   * An operation the caller's tenant does not have answers OPERATION_NOT_FOUND, like its other reads.
   */
  async holderOf(caller: Caller, operationRef: string): Promise<LeaseView> {
    const { revision } = await this.ledger.currentState(caller.tenant, operationRef);
    if (revision === NO_STREAM) throw new LedgerProblem('OPERATION_NOT_FOUND', 'the operation has no events');
    const key = this.key(caller.tenant, operationRef);
    return leaseView((await this.leases.getMany([key])).get(key), this.clock.now().getTime());
  }

  /**
   * Who holds each of up to 100 operations (none: an empty list) of the caller's tenant, in one read: for a list page,
   * so it needs no request per row. Refs the tenant has no lease on (or no such operation) read as
   * not held, which says nothing about whether they exist.
   */
  async holdersOf(
    caller: Caller,
    operationRefs: readonly string[],
  ): Promise<{ items: Array<LeaseView & { operation_ref: string }> }> {
    const refs = [...new Set(operationRefs)];
    const records = await this.leases.getMany(refs.map((ref) => this.key(caller.tenant, ref)));
    const nowMs = this.clock.now().getTime();
    return {
      items: refs.map((ref) => ({
        operation_ref: ref,
        ...leaseView(records.get(this.key(caller.tenant, ref)), nowMs),
      })),
    };
  }

  /** Which of these steps a worker's lease holds now: for triage, a held retry is being run, not overdue. */
  async heldOf(caller: Caller, operationRefs: readonly string[]): Promise<Set<string>> {
    const { items } = await this.holdersOf(caller, operationRefs);
    return new Set(items.filter((item) => item.held).map((item) => item.operation_ref));
  }

  /** Due items per tool and the oldest due instant, of one tenant or of all: for /metrics. */
  depth(tenant: string | undefined): Array<{ tool: string; depth: number; oldestDueMs: number | null }> {
    const nowMs = this.clock.now().getTime();
    return this.readModel.dueDepth(tenant, nowMs);
  }
}

/** A lease as a reader sees it: no id. A released lease kept on hold keeps the item from everyone, but no worker holds it. */
function leaseView(record: LeaseRecord | undefined, nowMs: number): LeaseView {
  if (!record || record.released || !isHeld(record, nowMs)) return { held: false };
  return {
    held: true,
    holder: record.holder,
    expires_at: new Date(record.expires_at_ms).toISOString(),
    ...(record.took_over ? { took_over_from: record.took_over.holder } : {}),
  };
}

export interface LeaseEvidenceAnswer extends LeaseEvidence {
  /** While the lease is unreleased: when it ends (a dispatch under it may not reach the provider after). */
  expires_at?: string;
}

export { stepDueMs };
