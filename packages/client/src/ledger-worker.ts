import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { EnvelopeLimits } from '@recovery-ledger/core/envelope';
import type { WorkItem } from './ledger-api.types';
import type { LedgerClient } from './ledger-client';
import { LedgerError } from './ledger-errors';
import {
  callMarginMs,
  MAX_CALL_WINDOW_MS,
  OutcomeNotRecordedError,
  runAttempt,
  verify,
  type ExecuteOptions,
  type Lookup,
  type ToolCall,
  type VerifyOutcome,
  type WriteOutcome,
} from './execute-write';

/** What a runtime plugs in per tool: the call (given operation_ref as its idempotency key) and the lookup by it. */
export interface WorkerTool<Input = any> {
  call: ToolCall<Input>;
  lookup: Lookup;
}

export type WorkerEvent =
  | { type: 'started'; worker: string; tools: string[]; concurrency: number }
  | {
      type: 'item';
      operation_ref: string;
      kind: WorkItem['kind'];
      attempt: number;
      status: string;
      took_over_from?: string;
    }
  | {
      type: 'recorded';
      operation_ref: string;
      attempt: number;
      status: string;
      next_action: string;
      code?: string;
      tool_called: boolean;
    }
  | { type: 'verified'; operation_ref: string; outcome: string; status: string; refusal?: string }
  | { type: 'lease_lost'; operation_ref: string }
  | { type: 'left_for_verification'; operation_ref: string; attempt: number }
  | { type: 'error'; operation_ref?: string; code: string; detail: string }
  | { type: 'stopped'; worker: string; report: WorkerReport };

export interface WorkerReport {
  items: number;
  dispatched: number;
  verified: number;
  succeeded: number;
  escalated: number;
  /** Renewals refused: the item went to another worker (the gate still judged what this one sent). */
  leasesLost: number;
  /** Attempts whose envelope could not be recorded: the ledger verifies them after the dispatch timeout. */
  leftForVerification: number;
  errors: number;
}

export interface LedgerWorkerOptions {
  tools: Readonly<Record<string, WorkerTool>>;
  /** Items worked on at once (default 4). */
  concurrency?: number;
  /** Stops the worker: no new item is taken; items in hand finish (their calls are not cut). */
  signal?: AbortSignal;
  /** The name leases are held under (default host-pid-random). */
  workerId?: string;
  /**
   * Lease length; renewed every third of it while an item is in hand (default 30 s). The ledger
   * caps it at the step's dispatch_timeout_ms, and so does the worker's own count of it.
   */
  leaseMs?: number;
  /** Long-poll wait per feed request (default 10 s). */
  waitMs?: number;
  onEvent?: (event: WorkerEvent) => void;
  now?: () => Date;
  limits?: EnvelopeLimits;
  normalize?: ExecuteOptions['normalize'];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A lease as the worker counts it on its own monotonic clock: it ends no later than the instant
 * the request that got (or renewed) it was sent plus the length granted, since the ledger started
 * the lease after that request left. A pause of the process only makes the count more cautious.
 */
class HeldLease {
  private endsAt: number;

  constructor(
    requestedAt: number,
    readonly lengthMs: number,
  ) {
    this.endsAt = requestedAt + lengthMs;
  }

  renewed(requestedAt: number): void {
    this.endsAt = Math.max(this.endsAt, requestedAt + this.lengthMs);
  }

  remainingMs(): number {
    return this.endsAt - performance.now();
  }

  /** More than a third of it gone: the renewals may have stalled with the process. */
  stale(): boolean {
    return this.remainingMs() < (this.lengthMs * 2) / 3;
  }
}

interface ItemInHand {
  lease: string;
  held: HeldLease;
  lost: boolean;
  finished: boolean;
  /** The ledger gave the lease back with the fact that ended the step: nothing to renew or release. */
  released?: boolean;
}

/**
 * Drives steps to their end from the ledger's work feed: it polls for due items, dispatches each
 * through the gate and calls the tool with operation_ref as the idempotency key, records the
 * envelope, verifies unknown outcomes with the tool's lookup, and renews and releases the lease of
 * each item. The ledger owns the schedule (when a retry is due, with what jitter, when a silent
 * dispatch is taken to be dead): nothing here waits for not_before or counts attempts.
 *
 * It is the dispatcher the timing rule counts on (docs/reliability.md "When an attempt may still
 * reach the provider"): each lease is also counted on its own monotonic clock, a lease a third gone
 * is renewed before a dispatch, and the call is held to the window runAttempt gets from the grant
 * and to what is left of the lease, so a worker that stood still does not call late.
 *
 * Stopping (the signal) takes no new item and lets items in hand finish; an envelope that could
 * not be recorded leaves its step in flight, which the ledger hands out for verification after the
 * step's dispatch timeout, by the same operation_ref. Nothing is abandoned silently: every such
 * case is an event and a count in the report.
 */
export class LedgerWorker {
  readonly id: string;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly waitMs: number;
  private readonly report: WorkerReport = {
    items: 0,
    dispatched: 0,
    verified: 0,
    succeeded: 0,
    escalated: 0,
    leasesLost: 0,
    leftForVerification: 0,
    errors: 0,
  };

  /** Releases sent for items already done; `run` answers once they have landed. */
  private readonly releasing = new Set<Promise<void>>();

  constructor(
    private readonly ledger: LedgerClient,
    private readonly options: LedgerWorkerOptions,
  ) {
    this.id = options.workerId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.concurrency = Math.max(1, Math.floor(options.concurrency ?? 4));
    this.leaseMs = options.leaseMs ?? 30_000;
    this.waitMs = options.waitMs ?? 10_000;
    if (Object.keys(options.tools).length === 0) throw new Error('LedgerWorker needs at least one tool');
  }

  private emit(event: WorkerEvent): void {
    this.options.onEvent?.(event);
  }

  /** Runs until the signal aborts and the items in hand are done; answers what was done. */
  async run(): Promise<WorkerReport> {
    const signal = this.options.signal;
    const tools = Object.keys(this.options.tools);
    const inHand = new Set<Promise<void>>();
    const stopped = aborted(signal);
    this.emit({ type: 'started', worker: this.id, tools, concurrency: this.concurrency });
    while (!signal?.aborted) {
      if (inHand.size >= this.concurrency) {
        await Promise.race([...inHand, stopped]);
        continue;
      }
      let items: WorkItem[];
      // The leases start after this request leaves: the worker's count of each starts here.
      const requestedAt = performance.now();
      try {
        const answer = await this.ledger.work({
          worker: this.id,
          tools,
          limit: this.concurrency - inHand.size,
          waitMs: this.waitMs,
          leaseMs: this.leaseMs,
          ...(signal ? { signal } : {}),
        });
        items = answer.items;
      } catch (error) {
        if (signal?.aborted) break;
        this.report.errors += 1;
        this.emit({ type: 'error', code: errorCode(error), detail: errorDetail(error) });
        await sleep(500);
        continue;
      }
      for (const item of items) {
        const work = this.handle(item, requestedAt).finally(() => inHand.delete(work));
        inHand.add(work);
      }
    }
    await Promise.allSettled([...inHand]);
    await Promise.allSettled([...this.releasing]);
    const report = { ...this.report };
    this.emit({ type: 'stopped', worker: this.id, report });
    return report;
  }

  private async handle(item: WorkItem, requestedAt: number): Promise<void> {
    this.report.items += 1;
    this.emit({
      type: 'item',
      operation_ref: item.operation_ref,
      kind: item.kind,
      attempt: item.attempt,
      status: item.status,
      ...(item.lease.took_over_from ? { took_over_from: item.lease.took_over_from } : {}),
    });
    const ref = item.operation_ref;
    const hand: ItemInHand = {
      lease: item.lease.id,
      held: new HeldLease(requestedAt, this.leaseLengthMs(item)),
      lost: false,
      finished: false,
    };
    const renewal = setInterval(
      () => {
        this.renew(ref, hand).catch(() => undefined);
      },
      Math.max(250, Math.floor(hand.held.lengthMs / 3)),
    );
    let holdMs: number | undefined;
    let release = true;
    try {
      holdMs = await this.work(item, hand);
    } catch (error) {
      if (error instanceof OutcomeNotRecordedError) {
        // The ledger still has the attempt in flight: keep the lease to its end, then the feed
        // hands the step out for verification after its dispatch timeout.
        release = false;
        this.report.leftForVerification += 1;
        this.emit({ type: 'left_for_verification', operation_ref: ref, attempt: error.attempt });
      } else {
        this.report.errors += 1;
        this.emit({ type: 'error', operation_ref: ref, code: errorCode(error), detail: errorDetail(error) });
      }
    } finally {
      clearInterval(renewal);
      hand.finished = true;
    }
    if (release && !hand.lost && !hand.released) {
      // The item is done: its slot is free now, so the next poll goes out beside this release
      // rather than a round trip after it. A release that lands late only keeps the step (a hold
      // included) from others a little longer; it names its lease, so it never frees a later one.
      const releasing: Promise<void> = this.ledger
        .releaseLease(ref, hand.lease, holdMs)
        .then(
          () => undefined,
          () => undefined,
        )
        .finally(() => this.releasing.delete(releasing));
      this.releasing.add(releasing);
    }
  }

  /** The lease length the worker counts with: what it asks for, within the ledger's cap (the step's dispatch timeout). */
  private leaseLengthMs(item: WorkItem): number {
    const cap = item.policy?.dispatch_timeout_ms;
    return typeof cap === 'number' && cap > 0 ? Math.min(this.leaseMs, cap) : this.leaseMs;
  }

  /** Renews the lease; answers false (and says so once) when the ledger says another holds the item. */
  private async renew(ref: string, hand: ItemInHand): Promise<boolean> {
    if (hand.released) return false;
    const requestedAt = performance.now();
    try {
      await this.ledger.renewLease(ref, hand.lease, this.leaseMs);
      hand.held.renewed(requestedAt);
      return true;
    } catch (error) {
      // A renewal still on its way when the release lands is refused: that lease was not lost.
      if (error instanceof LedgerError && error.code === 'LEASE_LOST' && !hand.lost && !hand.finished) {
        hand.lost = true;
        this.report.leasesLost += 1;
        this.emit({ type: 'lease_lost', operation_ref: ref });
      }
      if (error instanceof LedgerError && error.code === 'LEASE_LOST') return false;
      throw error;
    }
  }

  /** One item's work; answers how long to keep it from everyone (a check that must wait for its window). */
  private async work(item: WorkItem, hand: ItemInHand): Promise<number | undefined> {
    const tool = this.options.tools[item.tool];
    if (!tool) throw new Error(`no tool ${item.tool} in this worker`);
    const options: ExecuteOptions = {
      lease: hand.lease,
      ...(this.options.now ? { now: this.options.now } : {}),
      ...(this.options.limits ? { limits: this.options.limits } : {}),
      normalize: {
        ...(item.verification_tool ? { verificationTool: item.verification_tool } : {}),
        ...this.options.normalize,
      },
    };
    if (item.kind === 'dispatch') {
      if (item.input === undefined) {
        // Nothing to call the tool with: say so, and keep the step from being handed round in a loop.
        this.report.errors += 1;
        this.emit({
          type: 'error',
          operation_ref: item.operation_ref,
          code: 'WORK_ITEM_WITHOUT_INPUT',
          detail: 'planned without its input; start steps with startStep()',
        });
        return this.leaseMs;
      }
      // A third of the lease gone by this worker's clock: the process may have stood still (GC, a
      // VM stop) while another worker took the item. Ask the ledger before dispatching.
      if (hand.held.stale() && !(await this.renew(item.operation_ref, hand))) return undefined;
      if (hand.lost) return undefined;
      const remaining = Math.floor(hand.held.remainingMs());
      if (remaining <= callMarginMs(remaining)) {
        // Too little lease left to start a call in: dispatch nothing; the item goes back.
        this.report.errors += 1;
        this.emit({
          type: 'error',
          operation_ref: item.operation_ref,
          code: 'LEASE_TOO_SHORT',
          detail: `${remaining} ms of the lease left by this worker's clock`,
        });
        return undefined;
      }
      // The call window declared is what is left of the lease by this worker's clock: runAttempt
      // holds the call to it (with its margin) even when the ledger answers a longer one.
      const outcome = await runAttempt(
        this.ledger,
        {
          operationRef: item.operation_ref,
          attempt: item.attempt,
          inputHash: item.input_hash,
          input: item.input,
          sideEffect: item.side_effect as 'read' | 'write',
          tool: item.tool,
        },
        tool.call,
        { ...options, callWindowMs: Math.min(remaining, MAX_CALL_WINDOW_MS) },
      );
      if (outcome.leaseReleased) hand.released = true;
      this.afterWrite(outcome);
      if (outcome.toolCalled) this.report.dispatched += 1;
      // An unknown outcome is checked at once, while this worker still holds the item.
      if (outcome.kind !== 'recorded' || outcome.directive.next_action !== 'verify_operation') return undefined;
    }
    const verified = await verify(
      this.ledger,
      { operationRef: item.operation_ref, tool: item.tool },
      tool.lookup,
      options,
    );
    return this.afterVerify(verified);
  }

  private afterWrite(outcome: WriteOutcome): void {
    this.emit({
      type: 'recorded',
      operation_ref: outcome.operationRef,
      attempt: outcome.attempt ?? 0,
      status: outcome.status,
      next_action: outcome.directive.next_action,
      ...(outcome.refusal
        ? { code: outcome.refusal.code }
        : outcome.envelope && !outcome.envelope.ok
          ? { code: outcome.envelope.code }
          : {}),
      tool_called: outcome.toolCalled,
    });
    this.count(outcome.status);
  }

  private afterVerify(verified: VerifyOutcome): number | undefined {
    this.report.verified += 1;
    this.emit({
      type: 'verified',
      operation_ref: verified.operationRef,
      outcome: verified.outcome,
      status: verified.status,
      ...(verified.refusal ? { refusal: verified.refusal.code } : {}),
    });
    this.count(verified.status);
    // not_found inside the consistency window: nobody may conclude before it ends.
    if (verified.kind === 'refused' && verified.notBefore)
      return Math.max(0, Date.parse(verified.notBefore) - Date.now());
    return undefined;
  }

  private count(status: string): void {
    if (status === 'succeeded') this.report.succeeded += 1;
    if (status === 'escalated') this.report.escalated += 1;
  }
}

function aborted(signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return new Promise(() => undefined);
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

function errorCode(error: unknown): string {
  return error instanceof LedgerError ? error.code : error instanceof Error ? error.name : 'ERROR';
}

function errorDetail(error: unknown): string {
  return error instanceof LedgerError ? error.detail : error instanceof Error ? error.message : String(error);
}
