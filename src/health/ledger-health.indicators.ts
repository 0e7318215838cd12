import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import type { ProjectionRunner } from '../projection-engine/projection-runner';
import { PROJECTION_ENGINE, ProjectionsLifecycle } from '../projection-engine/projections.module';
import { EVENT_STORE, type EventStore, type StoreHealth } from '../store/event-store.port';
import { CLOCK, MonotonicClock, type Clock } from '../shared/clock';
import { INSTANCE_CLOCKS, type InstanceClocks } from '../ledger/instance-clocks';
import { IntegrityMonitor } from '../integrity/integrity-monitor';
import { HEALTH_SETTINGS, type HealthSettings } from './health-settings';

function within<T>(promise: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** What readiness checks: the ledger can take a write (store) and answer reads that are fresh enough (projections). */
@Injectable()
export class LedgerHealthIndicators {
  private engine: ProjectionRunner | null | undefined;
  /** Why a check failed, for the log only: driver messages name hosts and files (docs/contract.md §7). */
  private readonly causes = new Map<string, string>();

  constructor(
    @Inject(HealthIndicatorService) private readonly indicators: HealthIndicatorService,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
    @Inject(HEALTH_SETTINGS) private readonly settings: HealthSettings,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(INSTANCE_CLOCKS) private readonly instanceClocks: InstanceClocks | null,
  ) {}

  /**
   * Down once an audit has found the log broken (docs/reliability.md): an orchestrator then sends
   * this instance nothing, and the report says why. Up while an audit runs, since every decision
   * checks its own stream meanwhile.
   */
  historyIntact(): HealthIndicatorResult<'integrity'> {
    const session = this.indicators.check('integrity');
    // Public: the state and when, never counts (they would tell anyone the log's activity).
    const { state, checked_at, anchored, rollback, audit, start_check } = this.integrity.current();
    const shown = {
      state,
      ...(checked_at ? { checked_at } : {}),
      ...(anchored === undefined ? {} : { anchored }),
      ...(rollback && rollback.state !== 'not_checked' ? { rollback } : {}),
      // The start-up check from the last verified checkpoint and the audit behind the service
      // (docs/reliability.md, "Start-up without a full pass"): states only, no counts.
      ...(start_check ? { start_check: { state: start_check.state } } : {}),
      ...(audit ? { audit: { state: audit.state } } : {}),
    };
    // A log older than what was recorded before (docs/security.md, "A log rolled back"): down with
    // the stable code, so a probe and a person read the same reason writes answer with.
    if (rollback?.state === 'rolled_back') {
      return session.down({
        ...shown,
        code: 'HISTORY_ROLLED_BACK',
        message:
          'the log was rolled back to an older copy: writes are refused; see the service log and `recovery-ledger verify --witness`',
      });
    }
    if (state === 'broken')
      return session.down({
        ...shown,
        message: 'the stored history failed verification: run `recovery-ledger verify`',
      });
    if (state === 'unverifiable') return session.down({ ...shown, message: 'the log could not be audited' });
    return session.up(shown);
  }

  /**
   * Always up: a wall clock step is handled (decisions follow monotonic time), and shown here. So is
   * the agreement of the instances sharing the store (docs/reliability.md, "Instances agree on
   * time"): `degraded` while one clock is ahead of another beyond the bound, since expired leases
   * are then not handed over; fresh work is, so the instance stays ready.
   */
  clockSteps(): HealthIndicatorResult<'clock'> {
    const session = this.indicators.check('clock');
    if (!(this.clock instanceof MonotonicClock)) return session.up({ source: 'injected' });
    const status = this.clock.status();
    const instances = this.instanceClocks?.status();
    const skewed = instances?.reason === 'skew';
    const messages = [
      ...(status.steps_detected > 0
        ? ['the wall clock stepped; decisions follow elapsed time, not the wall clock']
        : []),
      ...(skewed
        ? [
            `the clocks of two instances sharing the store differ by ${instances.skew_ms} ms (bound ${instances.skew_bound_ms} ms): expired leases are not handed over until they agree`,
          ]
        : []),
    ];
    return session.up({
      source: 'monotonic',
      ...status,
      ...(instances ? { state: skewed ? 'degraded' : 'ok', instances } : {}),
      ...(messages.length > 0 ? { message: messages.join('; ') } : {}),
    });
  }

  async storeReachable(): Promise<HealthIndicatorResult<'store'>> {
    const session = this.indicators.check('store');
    const health = await within<StoreHealth>(
      this.store.health().catch((error: Error) => ({ ok: false, detail: error.message })),
      this.settings.checkTimeoutMs,
      () => ({ ok: false, detail: `no answer within ${this.settings.checkTimeoutMs} ms` }),
    );
    if (health.ok) {
      this.causes.delete('store');
      return session.up();
    }
    this.causes.set('store', health.detail ?? 'unreachable');
    return session.down({ message: 'the event store is unreachable' });
  }

  /** The internal reasons behind the last failed checks, to log beside the public report. */
  failureCauses(): Record<string, string> {
    return Object.fromEntries(this.causes);
  }

  async projectionsFresh(): Promise<HealthIndicatorResult<'projections'>> {
    const session = this.indicators.check('projections');
    const engine = this.projectionEngine();
    // An application built without the projection engine serves no projection reads to be stale.
    if (!engine) return session.up({ engine: 'not running in this process' });
    const check = this.readModelCheck();
    if (check && (check.state === 'verifying' || check.state === 'failed')) {
      return session.down({
        read_models: check,
        message: 'the read models are being checked against the log (or rebuilt), and are not served as true yet',
      });
    }
    const { state, error, worker, shared } = engine.status();
    // Where it runs, and how often its thread ended unasked (each time started again, loudly logged).
    const thread: { thread: string; worker_restarts?: number; read_models?: string } = worker
      ? { thread: 'worker', worker_restarts: worker.restarts }
      : { thread: 'inline', ...(shared ? { read_models: shared.role } : {}) };
    this.causes.delete('projections');
    if (state === 'failed') {
      this.causes.set('projections', error ?? 'failed');
      return session.down({
        state,
        ...thread,
        message: 'the projection engine failed; it follows the log again shortly',
      });
    }
    let lags;
    try {
      lags = await within(engine.lag(), this.settings.checkTimeoutMs, () => undefined);
    } catch (failure) {
      this.causes.set('projections', (failure as Error).message);
      return session.down({ state, message: 'the projection lag cannot be read' });
    }
    if (!lags)
      return session.down({
        state,
        message: `the projection lag cannot be read within ${this.settings.checkTimeoutMs} ms`,
      });
    const maxLagMs = Math.max(0, ...lags.map((lag) => lag.ms_behind));
    // A count only where every projection's is known: null on a store whose positions count nothing
    // (EventStoreDB) while any projection is behind; 0 there too once all have caught up.
    let eventsBehind: number | null = 0;
    for (const lag of lags)
      eventsBehind =
        eventsBehind === null || lag.events_behind === null ? null : Math.max(eventsBehind, lag.events_behind);
    const data = {
      state,
      ...thread,
      lag_ms: maxLagMs,
      events_behind: eventsBehind,
      max_lag_ms: this.settings.maxProjectionLagMs,
    };
    return maxLagMs > this.settings.maxProjectionLagMs
      ? session.down({ ...data, message: 'projections lag behind the log' })
      : session.up(data);
  }

  private readModelCheck() {
    try {
      return this.moduleRef.get(ProjectionsLifecycle, { strict: false }).readModelCheck;
    } catch {
      return undefined;
    }
  }

  private projectionEngine(): ProjectionRunner | null {
    if (this.engine === undefined) {
      // Looked up, not injected: the engine lives in its own module, which the health module must
      // not start (or require) just to report on it.
      try {
        this.engine = this.moduleRef.get<ProjectionRunner>(PROJECTION_ENGINE, { strict: false });
      } catch {
        this.engine = null;
      }
    }
    return this.engine;
  }
}
