import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { integerSetting } from '../config/ledger-config';
import type { WindowClock } from '@recovery-ledger/core';
import type { InstanceHeartbeat, TimeBase, TimeBaseStore } from '../store/time-base.port';
import { monotonicMs, MonotonicClock, type ClockStep } from '../shared/clock';

/**
 * Service instances sharing a store agree on ledger time (docs/reliability.md, "Instances agree on
 * time"): a lease is written on one instance's clock and judged expired on another's, so a clock
 * ahead of the others hands a live worker's item to someone else early.
 *
 * - Instances of one boot of one host share the base kept in the store (src/store/time-base.port.ts)
 *   and the kernel's monotonic clock, so they compute the same ledger time.
 * - Instances that cannot share it (another host, or a store unreachable when one started) compare
 *   clocks through heartbeats; while a live instance's clock is seen ahead of another's by more than
 *   the bound, no instance hands over another holder's expired lease (see `judgeSkew`).
 */
export interface ClockSettings {
  /** How often each instance writes its heartbeat and reads the others'. */
  heartbeatMs: number;
  /** A clock ahead of another live instance's by more than this holds every take-over back. */
  skewBoundMs: number;
  /**
   * Instead of the kernel's boot id: processes given different ids never share a base and are
   * compared by heartbeats alone (for a host whose processes do not share one monotonic clock, as
   * in separate time namespaces).
   */
  bootId?: string;
}

export const DEFAULT_CLOCK_SETTINGS: ClockSettings = { heartbeatMs: 2_000, skewBoundMs: 1_000 };

/** A heartbeat unchanged for this many periods (by the reader's own monotonic clock) is no longer live. */
export const LIVE_PERIODS = 3;
/**
 * Heartbeats a peer must write after the one this instance first read before this instance trusts
 * the peer has judged its clock: the first is written after our first heartbeat was in the store,
 * and the peer reads ours right after writing it; the second carries its verdict.
 */
export const CHANGES_TO_BE_JUDGED = 2;

export function loadClockSettings(env: NodeJS.ProcessEnv = process.env): ClockSettings {
  return {
    heartbeatMs: integerSetting(env, 'LEDGER_CLOCK_HEARTBEAT_MS', DEFAULT_CLOCK_SETTINGS.heartbeatMs, 100, 60_000),
    skewBoundMs: integerSetting(env, 'LEDGER_CLOCK_SKEW_BOUND_MS', DEFAULT_CLOCK_SETTINGS.skewBoundMs, 0, 3_600_000),
    ...(env.LEDGER_CLOCK_BOOT_ID ? { bootId: env.LEDGER_CLOCK_BOOT_ID } : {}),
  };
}

/** The host's boot, where Linux names it; elsewhere this process alone (it then shares no base). */
export function readBootId(file = '/proc/sys/kernel/random/boot_id'): string {
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (id) return id;
  } catch {
    /* not Linux */
  }
  return `process-${randomUUID()}`;
}

/** What one instance has seen of another's heartbeats. */
export interface PeerView {
  heartbeat: InstanceHeartbeat;
  /** Whether it computes ledger time from the same base (same boot, same base). */
  sharesBase: boolean;
  /** When its heartbeat last changed, by the viewer's monotonic clock. */
  changedAtMs: number;
  /** How many heartbeats it wrote after the one the viewer first read. */
  changesSeen: number;
  /** The largest `its ledger_ms - viewer's ledger time after reading it` seen: a lower bound of its lead. */
  maxLeadMs: number;
  /**
   * The last few `viewer's ledger time after reading it - its ledger_ms` (0 when it shares the
   * viewer's base): each an upper bound of the viewer's lead over it (its heartbeat was written
   * before it was read), the smallest the tightest.
   */
  leadBounds: number[];
}

/** Upper bounds of a peer's lead kept: the tightest of recent reads, while both clocks tick alike. */
export const LEAD_BOUNDS_KEPT = 8;

/** The viewer's lead over a peer is at most this (its smallest recent upper bound). */
export function leadBoundMs(peer: PeerView): number {
  return peer.leadBounds.length === 0 ? Number.POSITIVE_INFINITY : Math.min(...peer.leadBounds);
}

export interface SkewJudgement {
  /** Live instances besides the viewer. */
  livePeers: number;
  /** The largest lead of one live instance's clock over another's that anyone has seen (0 if none). */
  skewMs: number;
  /** The live peer whose clock is furthest ahead of the viewer's, as the viewer saw it. */
  ahead?: { instance_id: string; ms: number };
  takeOvers: 'allowed' | 'held';
  /** Why take-overs are held: a skew beyond the bound, or peers that have not yet judged this clock. */
  reason?: 'skew' | 'unjudged';
}

/**
 * The skew rule. A heartbeat's ledger time was taken before the viewer read it, so
 * `its ledger_ms - viewer's time after the read` is never more than the true lead: a skew is never
 * seen where there is none, and a true lead L shows at least as L minus the heartbeat's age. Each
 * instance sees only the clocks ahead of its own, and publishes the largest in its heartbeat, so the
 * instance that is ahead learns it from the others. Take-overs are held while any live instance's
 * lead, seen by itself or reported by a live peer, is beyond the bound; and, after start, until every
 * live peer that does not share this instance's base has had the time to judge it.
 */
export function judgeSkew(input: {
  selfId: string;
  peers: readonly PeerView[];
  nowMonotonicMs: number;
  settings: ClockSettings;
}): SkewJudgement {
  const { selfId, nowMonotonicMs, settings } = input;
  const live = input.peers.filter((peer) => nowMonotonicMs - peer.changedAtMs <= LIVE_PERIODS * settings.heartbeatMs);
  const liveIds = new Set([selfId, ...live.map((peer) => peer.heartbeat.instance_id)]);
  let ahead: SkewJudgement['ahead'];
  for (const peer of live) {
    if (peer.maxLeadMs > 0 && (!ahead || peer.maxLeadMs > ahead.ms))
      ahead = { instance_id: peer.heartbeat.instance_id, ms: Math.round(peer.maxLeadMs) };
  }
  let skewMs = ahead?.ms ?? 0;
  for (const peer of live) {
    const reported = peer.heartbeat.ahead;
    if (reported && liveIds.has(reported.instance_id)) skewMs = Math.max(skewMs, reported.ms);
  }
  const base = { livePeers: live.length, skewMs, ...(ahead ? { ahead } : {}) };
  if (skewMs > settings.skewBoundMs) return { ...base, takeOvers: 'held', reason: 'skew' };
  if (live.some((peer) => !peer.sharesBase && peer.changesSeen < CHANGES_TO_BE_JUDGED))
    return { ...base, takeOvers: 'held', reason: 'unjudged' };
  return { ...base, takeOvers: 'allowed' };
}

/**
 * How this instance judges a window another instance may have started (docs/reliability.md,
 * "Windows across instances"). A window started on a clock behind this one by δ looks δ shorter, so
 * it closes here only a margin after its end: the largest upper bound of this instance's lead over a
 * live peer (each measured from that peer's heartbeats, however old; 0 for one of this base), never
 * less than 0. None while take-overs are held (a skew beyond the bound, or peers not yet compared),
 * nor while that margin is beyond the bound plus one heartbeat period (a lead within the bound
 * shows as at most that): then no decision that needs a window to have closed is taken.
 */
export function judgeWindows(input: {
  judgement: SkewJudgement;
  peers: readonly PeerView[];
  nowMonotonicMs: number;
  settings: ClockSettings;
}): WindowClock {
  const { judgement, nowMonotonicMs, settings } = input;
  if (judgement.takeOvers === 'held') return { unbounded: judgement.reason ?? 'skew' };
  let margin = 0;
  for (const peer of input.peers) {
    if (nowMonotonicMs - peer.changedAtMs > LIVE_PERIODS * settings.heartbeatMs) continue;
    margin = Math.max(margin, leadBoundMs(peer));
  }
  if (margin > settings.skewBoundMs + settings.heartbeatMs) return { unbounded: 'skew' };
  return { margin_ms: Math.ceil(margin) };
}

export interface InstanceClocksOptions {
  settings?: ClockSettings;
  instanceId?: string;
  bootId?: string;
  wallNow?: () => number;
  monotonicNow?: () => number;
  /** Beat on a timer (the service); tests call `beat()` themselves. */
  timer?: boolean;
  onStep?: (step: ClockStep) => void;
  /** Take-overs became held or allowed again. */
  onAgreementChange?: (judgement: SkewJudgement) => void;
  /** The store could not be reached for the base (the instance runs on its own) or a heartbeat. */
  onStoreError?: (what: 'base' | 'heartbeat', error: Error) => void;
}

export interface InstanceClockStatus {
  /** `shared`: this boot's base from the store; `own`: this process's start (the store was unreachable). */
  time_base: 'shared' | 'own';
  /** When the base was read from the wall clock, in ledger time. */
  time_base_since: string;
  live_instances: number;
  skew_ms: number;
  skew_bound_ms: number;
  take_overs: 'allowed' | 'held';
  reason?: 'skew' | 'unjudged';
}

/** This instance's ledger clock on the shared base, and its view of the other instances' clocks. */
export class InstanceClocks {
  readonly instanceId: string;
  readonly bootId: string;
  readonly clock: MonotonicClock;
  readonly settings: ClockSettings;
  private readonly peers = new Map<string, PeerView>();
  private readonly monotonicNow: () => number;
  private seq = 0;
  private judgement: SkewJudgement = { livePeers: 0, skewMs: 0, takeOvers: 'allowed' };
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;

  static async start(store: TimeBaseStore, options: InstanceClocksOptions = {}): Promise<InstanceClocks> {
    const instanceId = options.instanceId ?? randomUUID();
    const bootId = options.bootId ?? options.settings?.bootId ?? readBootId();
    const wallNow = options.wallNow ?? Date.now;
    const monotonicNow = options.monotonicNow ?? monotonicMs;
    const proposed: TimeBase = {
      boot_id: bootId,
      wall_ms: wallNow(),
      monotonic_ms: monotonicNow(),
      instance_id: instanceId,
    };
    let base: TimeBase;
    let shared = true;
    try {
      base = await store.adoptBase(proposed);
    } catch (error) {
      // The service still starts (a store outage is shown by readiness); this clock is then its own,
      // and heartbeats, once the store answers, judge it like another host's.
      options.onStoreError?.('base', error as Error);
      base = proposed;
      shared = false;
    }
    const clocks = new InstanceClocks(store, options, instanceId, bootId, base, shared, monotonicNow);
    await clocks.beat();
    if (options.timer ?? true) clocks.startTimer();
    return clocks;
  }

  private constructor(
    private readonly store: TimeBaseStore,
    private readonly options: InstanceClocksOptions,
    instanceId: string,
    bootId: string,
    private readonly base: TimeBase,
    private readonly shared: boolean,
    monotonicNow: () => number,
  ) {
    this.instanceId = instanceId;
    this.bootId = bootId;
    this.settings = options.settings ?? DEFAULT_CLOCK_SETTINGS;
    this.monotonicNow = monotonicNow;
    this.clock = new MonotonicClock({
      base: { wallMs: base.wall_ms, monotonicMs: base.monotonic_ms },
      wallNow: options.wallNow,
      monotonicNow,
      onStep: options.onStep,
    });
  }

  private startTimer(): void {
    this.timer = setInterval(() => void this.beat(), this.settings.heartbeatMs);
    this.timer.unref();
  }

  /** Whether a peer's heartbeat says it computes ledger time from this instance's base. */
  private sharesBase(heartbeat: InstanceHeartbeat): boolean {
    return (
      this.shared &&
      heartbeat.boot_id === this.bootId &&
      heartbeat.base_wall_ms === this.base.wall_ms &&
      heartbeat.base_monotonic_ms === this.base.monotonic_ms
    );
  }

  /** Writes this instance's heartbeat, reads the others', and judges the clocks again. */
  beat(): Promise<void> {
    // One at a time: a slow store must not pile heartbeats up.
    this.beating ??= this.beatOnce().finally(() => {
      this.beating = undefined;
    });
    return this.beating;
  }

  private async beatOnce(): Promise<void> {
    this.seq += 1;
    const own: InstanceHeartbeat = {
      instance_id: this.instanceId,
      boot_id: this.bootId,
      ledger_ms: this.clock.now().getTime(),
      monotonic_ms: this.monotonicNow(),
      seq: this.seq,
      ...(this.shared ? { base_wall_ms: this.base.wall_ms, base_monotonic_ms: this.base.monotonic_ms } : {}),
      ...(this.judgement.ahead ? { ahead: this.judgement.ahead } : {}),
    };
    let heartbeats: InstanceHeartbeat[];
    try {
      heartbeats = await this.store.beat(own);
    } catch (error) {
      this.options.onStoreError?.('heartbeat', error as Error);
      this.judge();
      return;
    }
    const readAtMs = this.clock.now().getTime();
    const nowMono = this.monotonicNow();
    const present = new Set<string>();
    for (const heartbeat of heartbeats) {
      if (heartbeat.instance_id === this.instanceId) continue;
      present.add(heartbeat.instance_id);
      const lead = heartbeat.ledger_ms - readAtMs;
      const known = this.peers.get(heartbeat.instance_id);
      const sharesBase = known?.sharesBase ?? this.sharesBase(heartbeat);
      // On one base both ledger clocks are that base plus the boot's one monotonic clock: no lead
      // to bound. Elsewhere the bound holds the heartbeat's age too, not told apart from a lead.
      const leadBound = sharesBase ? 0 : -lead;
      if (!known) {
        this.peers.set(heartbeat.instance_id, {
          heartbeat,
          sharesBase,
          // On one boot the monotonic clock is one: a heartbeat left by an instance that crashed is
          // as old as it says, and not live from the first read once three periods have passed.
          changedAtMs: sharesBase ? Math.min(nowMono, heartbeat.monotonic_ms) : nowMono,
          changesSeen: 0,
          maxLeadMs: lead,
          leadBounds: [leadBound],
        });
        continue;
      }
      known.maxLeadMs = Math.max(known.maxLeadMs, lead);
      known.leadBounds.push(leadBound);
      if (known.leadBounds.length > LEAD_BOUNDS_KEPT) known.leadBounds.shift();
      if (heartbeat.seq > known.heartbeat.seq) {
        // Counted by its own sequence: two beats between two of our reads are two chances it had to judge us.
        known.changesSeen += heartbeat.seq - known.heartbeat.seq;
        known.heartbeat = heartbeat;
        known.changedAtMs = nowMono;
      }
    }
    for (const id of [...this.peers.keys()]) if (!present.has(id)) this.peers.delete(id);
    this.judge();
  }

  private judge(): void {
    const before = this.judgement.takeOvers;
    this.judgement = judgeSkew({
      selfId: this.instanceId,
      peers: [...this.peers.values()],
      nowMonotonicMs: this.monotonicNow(),
      settings: this.settings,
    });
    if (this.judgement.takeOvers !== before) this.options.onAgreementChange?.(this.judgement);
  }

  /**
   * How a window is judged now. `fresh`: after heartbeats read from now on, so an instance that
   * wrote what is being judged (its heartbeat is written before it serves) is among the peers.
   */
  async windowClock(fresh: boolean): Promise<WindowClock> {
    if (fresh) {
      // A beat under way may have read before the caller's question: wait for it, then one of our own.
      await this.beating?.catch(() => undefined);
      await this.beat();
    }
    return judgeWindows({
      judgement: this.judgement,
      peers: [...this.peers.values()],
      nowMonotonicMs: this.monotonicNow(),
      settings: this.settings,
    });
  }

  /** When to ask again after windows could not be judged: by then the clocks are compared twice more. */
  retryAfterMs(): number {
    return CHANGES_TO_BE_JUDGED * this.settings.heartbeatMs;
  }

  takeOversAllowed(): boolean {
    return this.judgement.takeOvers === 'allowed';
  }

  status(): InstanceClockStatus {
    const { livePeers, skewMs, takeOvers, reason } = this.judgement;
    return {
      time_base: this.shared ? 'shared' : 'own',
      time_base_since: new Date(this.base.wall_ms).toISOString(),
      live_instances: livePeers + 1,
      skew_ms: skewMs,
      skew_bound_ms: this.settings.skewBoundMs,
      take_overs: takeOvers,
      ...(reason ? { reason } : {}),
    };
  }

  /** Stops beating and removes this instance's heartbeat, so no peer waits on it. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.beating?.catch(() => undefined);
    await this.store.leave(this.instanceId).catch(() => undefined);
    await this.store.close();
  }
}

export const INSTANCE_CLOCKS = Symbol('INSTANCE_CLOCKS');
