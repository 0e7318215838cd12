/**
 * The time base port: what lets service instances sharing a store agree on ledger time
 * (docs/reliability.md, "Instances agree on time"). Every adapter passes
 * test/contract/time-base.contract.ts.
 *
 * - A **base** per boot of a host: the wall clock read once by the first instance of that boot, and
 *   the kernel's monotonic clock at the same moment. Every instance of the boot computes ledger
 *   time as `wall_ms + (monotonic_now - monotonic_ms)`, so their clocks agree to the microsecond
 *   whenever each started. The first instance of a boot writes it (a compare-and-set decides a race
 *   of two); a new boot's base never starts before an earlier boot's did.
 * - A **heartbeat** per instance, written every few seconds with the instance's ledger time:
 *   instances of other boots (other hosts) cannot share a monotonic clock, so they compare their
 *   clocks through these instead (src/ledger/instance-clocks.ts).
 * Times are milliseconds since the epoch; monotonic readings are milliseconds of CLOCK_MONOTONIC.
 */
export interface TimeBase {
  /** `/proc/sys/kernel/random/boot_id`, or a per-process id where the host has none. */
  boot_id: string;
  wall_ms: number;
  monotonic_ms: number;
  /** The instance that wrote it. */
  instance_id: string;
}

export interface InstanceHeartbeat {
  instance_id: string;
  boot_id: string;
  /** The instance's ledger time when it wrote this. */
  ledger_ms: number;
  /** Its monotonic clock then: comparable only among instances of one boot. */
  monotonic_ms: number;
  /** Counts up with each heartbeat, so a reader sees it change whatever the clocks say. */
  seq: number;
  /** The stored base it computes ledger time from (absent: its own start, the store being unreachable then). */
  base_wall_ms?: number;
  base_monotonic_ms?: number;
  /** The largest lead of another live instance's clock over this one's that it has seen. */
  ahead?: { instance_id: string; ms: number };
}

export interface TimeBaseStore {
  /**
   * The stored base of `proposed.boot_id`; when there is none, `proposed` is written, raised first
   * to the latest start of another boot's base, so that a clock set far back at boot (a lost RTC)
   * does not take ledger time back past it. Two instances racing here both answer one base.
   */
  adoptBase(proposed: TimeBase): Promise<TimeBase>;
  /** Writes this instance's heartbeat (replacing its last) and answers every stored one, its own too. */
  beat(heartbeat: InstanceHeartbeat): Promise<InstanceHeartbeat[]>;
  /** Removes this instance's heartbeat: it stopped, and nobody should wait on it. */
  leave(instanceId: string): Promise<void>;
  close(): Promise<void>;
}

/** Heartbeats older than this (by two clocks: `heartbeatCutMs`) are dropped. */
export const HEARTBEAT_RETENTION_MS = 24 * 3_600_000;

/**
 * Heartbeats older than this are dropped: the retention before the second newest heartbeat (the
 * newest, when there is one). By the newest alone, one clock more than the retention ahead would
 * erase every other heartbeat, and with them the skew it must be judged by.
 */
export function heartbeatCutMs(ledgerTimes: readonly number[]): number {
  const [newest, second] = [...ledgerTimes].sort((x, y) => y - x);
  return (second ?? newest ?? Number.NEGATIVE_INFINITY) - HEARTBEAT_RETENTION_MS;
}
/** Bases kept: the latest boots' (an old boot's base is only a floor for the next). */
export const BASES_KEPT = 16;

/**
 * The floor of a new base: the latest start of a stored one. Not the latest heartbeat: a host whose
 * clock ran ahead would then pass its error on to every later boot, however its clock is fixed;
 * within a stream `decisionTime` already keeps time from running back.
 */
export function latestBaseMs(bases: readonly TimeBase[]): number {
  let latest = Number.NEGATIVE_INFINITY;
  for (const base of bases) latest = Math.max(latest, base.wall_ms);
  return latest;
}

/** `proposed`, started no earlier than `floorMs`. */
export function raisedBase(proposed: TimeBase, floorMs: number): TimeBase {
  return Number.isFinite(floorMs) && floorMs > proposed.wall_ms ? { ...proposed, wall_ms: floorMs } : proposed;
}
