/**
 * The lease port: who may act on a work item now (docs/contract.md §6). One record per item key
 * (the item is an operation of a tenant); every change is a compare-and-set on that record, so two
 * service instances sharing a store never grant one item to two workers at once. Every adapter
 * passes test/contract/lease-store.contract.ts.
 *
 * Rules, judged on the `now` the caller passes (the ledger's clock, never a worker's):
 * - An item is free when it has no record, or its record's `expires_at` is not after `now`.
 * - `acquire` on a free item writes a new lease; on a held item it changes nothing. With
 *   `takeOver: false` it also leaves alone an expired lease of another holder that was never
 *   released: while the instances' clocks disagree, an expiry judged here may be early
 *   (docs/reliability.md, "Instances agree on time"). A fresh or released item is still granted.
 * - `renew` extends a lease only for its own id while it is unreleased and nobody took the item
 *   over: a lease past its expiry that no one has taken yet may still be renewed.
 * - `release` ends a lease; with `holdMs` the item stays unavailable that long (a check that must
 *   wait for a consistency window, say), otherwise it is free at once.
 * Lease times are milliseconds since the epoch, so no adapter parses dates to compare them.
 */
export interface LeaseRecord {
  key: string;
  lease_id: string;
  /** The worker the item is handed to (a name the worker chose). */
  holder: string;
  /**
   * The id of the API key the lease was granted to: only that key renews or releases it, so another
   * key of the tenant that learnt the lease id cannot. Absent on records written before it existed.
   */
  granted_to?: string;
  acquired_at_ms: number;
  /** Until when no one else may take the item: the lease's end, or after a release, its hold. */
  expires_at_ms: number;
  released: boolean;
  /** The lease this one replaced, when that one was neither released nor renewed in time. */
  took_over?: { lease_id: string; holder: string; expired_at_ms: number };
  /** The lease this one replaced, however it ended: evidence for a fact sent under a stale id. */
  previous?: { lease_id: string; holder: string };
}

export type AcquireResult =
  { granted: true; lease: LeaseRecord; replaced?: LeaseRecord } | { granted: false; current: LeaseRecord };

export interface AcquireRequest {
  key: string;
  leaseId: string;
  holder: string;
  /** The key id the lease is granted to (LeaseRecord.granted_to). */
  grantedTo?: string;
  nowMs: number;
  ttlMs: number;
  /** False: do not hand over an unreleased lease of another holder, even expired (default true). */
  takeOver?: boolean;
}

export interface LeaseStore {
  acquire(request: AcquireRequest): Promise<AcquireResult>;
  /** The renewed lease, or undefined when this id no longer holds the item. */
  renew(key: string, leaseId: string, nowMs: number, ttlMs: number): Promise<LeaseRecord | undefined>;
  /** True when this id held the item and now no longer does. */
  release(key: string, leaseId: string, nowMs: number, holdMs?: number): Promise<boolean>;
  /** The records of these keys that exist (any state), for filtering candidates in one read. */
  getMany(keys: readonly string[]): Promise<Map<string, LeaseRecord>>;
  close(): Promise<void>;
}

/** Whether the record keeps the item from being handed out at `nowMs`. */
export function isHeld(record: LeaseRecord | undefined, nowMs: number): boolean {
  return record !== undefined && record.expires_at_ms > nowMs;
}

/** Whether `request` may replace `current`: it is free, and not a take-over that is held back. */
function mayAcquire(request: AcquireRequest, current: LeaseRecord | undefined): boolean {
  if (isHeld(current, request.nowMs)) return false;
  return !(request.takeOver === false && current && !current.released && current.holder !== request.holder);
}

/** The whole acquire rule over the record read: what to write (nothing when refused) and what to answer. */
export function acquireDecision(
  request: AcquireRequest,
  current: LeaseRecord | undefined,
): { write?: LeaseRecord; answer: AcquireResult } {
  if (!mayAcquire(request, current)) return { answer: { granted: false, current: current as LeaseRecord } };
  const lease = grantedRecord(request, current);
  return { write: lease, answer: { granted: true, lease, ...(current ? { replaced: current } : {}) } };
}

/**
 * Every acquire through the returned store asks `takeOversAllowed()` first and passes the answer as
 * `takeOver`: how the instance's clock agreement reaches the leases without the feed knowing.
 */
export function withTakeOverGate(store: LeaseStore, takeOversAllowed: () => boolean): LeaseStore {
  return {
    acquire: (request) => store.acquire(takeOversAllowed() ? request : { ...request, takeOver: false }),
    renew: (key, leaseId, nowMs, ttlMs) => store.renew(key, leaseId, nowMs, ttlMs),
    release: (key, leaseId, nowMs, holdMs) => store.release(key, leaseId, nowMs, holdMs),
    getMany: (keys) => store.getMany(keys),
    close: () => store.close(),
  };
}

/**
 * The record an acquire writes over `current` (undefined: none). Shared by the adapters so the
 * rules above are written once; each adapter only makes the write conditional on what it read.
 */
export function grantedRecord(request: AcquireRequest, current: LeaseRecord | undefined): LeaseRecord {
  const lease: LeaseRecord = {
    key: request.key,
    lease_id: request.leaseId,
    holder: request.holder,
    ...(request.grantedTo === undefined ? {} : { granted_to: request.grantedTo }),
    acquired_at_ms: request.nowMs,
    expires_at_ms: request.nowMs + request.ttlMs,
    released: false,
  };
  if (current) {
    lease.previous = { lease_id: current.lease_id, holder: current.holder };
    if (!current.released) {
      lease.took_over = { lease_id: current.lease_id, holder: current.holder, expired_at_ms: current.expires_at_ms };
    }
  }
  return lease;
}

/** A renewal of `current` by `leaseId`, or undefined when that id does not hold the item. */
export function renewedRecord(
  current: LeaseRecord | undefined,
  leaseId: string,
  nowMs: number,
  ttlMs: number,
): LeaseRecord | undefined {
  if (!current || current.lease_id !== leaseId || current.released) return undefined;
  return { ...current, expires_at_ms: Math.max(current.expires_at_ms, nowMs + ttlMs) };
}

/** An adapter's compare-and-set on one item's record: read it, decide, write what was decided, answer. */
export type LeaseChange = <T>(
  key: string,
  decide: (current: LeaseRecord | undefined) => { write?: LeaseRecord; answer: T },
) => Promise<T>;

/** acquire, renew and release over an adapter's compare-and-set: the rules above, written once. */
export function leaseOperations(change: LeaseChange): Pick<LeaseStore, 'acquire' | 'renew' | 'release'> {
  return {
    acquire: (request) => change<AcquireResult>(request.key, (current) => acquireDecision(request, current)),
    renew: (key, leaseId, nowMs, ttlMs) =>
      change(key, (current) => {
        const renewed = renewedRecord(current, leaseId, nowMs, ttlMs);
        return { write: renewed, answer: renewed };
      }),
    release: (key, leaseId, nowMs, holdMs) =>
      change(key, (current) => {
        const released = releasedRecord(current, leaseId, nowMs, holdMs);
        return { write: released, answer: released !== undefined };
      }),
  };
}

export function releasedRecord(
  current: LeaseRecord | undefined,
  leaseId: string,
  nowMs: number,
  holdMs = 0,
): LeaseRecord | undefined {
  if (!current || current.lease_id !== leaseId || current.released) return undefined;
  return { ...current, released: true, expires_at_ms: nowMs + Math.max(0, holdMs) };
}

export const LEASE_STORE = Symbol('LEASE_STORE');
