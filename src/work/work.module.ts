import { Inject, Module, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { CLOCK, type Clock } from '../shared/clock';
import { INSTANCE_CLOCKS, type InstanceClocks } from '../ledger/instance-clocks';
import { APPEND_LISTENERS, type AppendListener } from '../ledger/ledger-observer';
import { LedgerService } from '../ledger/ledger.service';
import { METRICS_REGISTRY } from '../observability/metrics';
import { registerWorkMetrics } from '../observability/work-metrics';
import { PROJECTION_ENGINE, READ_MODEL } from '../projection-engine/projections.module';
import type { ProjectionRunner } from '../projection-engine/projection-runner';
import { ProjectionsModule } from '../projection-engine/projections.module';
import type { ReadModel } from '../store/read-model.port';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { LEASE_STORE, withTakeOverGate, type LeaseStore } from '../store/lease-store.port';
import { openLeaseStore } from '../adapters/store.factory';
import { stepStateProjection } from '@recovery-ledger/projections';
import { DEFAULT_WORK_FEED_SETTINGS, WorkFeed } from './work-feed';

class LeaseStoreLifecycle implements OnModuleDestroy, OnApplicationShutdown {
  constructor(
    @Inject(LEASE_STORE) private readonly leases: LeaseStore,
    @Inject(WorkFeed) private readonly feed: WorkFeed,
  ) {}

  onModuleDestroy(): void {
    // First shutdown phase: waiting long polls answer (empty) so the server can close promptly.
    this.feed.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.leases.close();
  }
}

/** The work feed, its leases and their metrics (docs/contract.md §4, §9). */
@Module({
  imports: [ProjectionsModule],
  providers: [
    {
      provide: LEASE_STORE,
      inject: [CONFIG, EVENT_STORE, { token: INSTANCE_CLOCKS, optional: true }],
      // While the instances' clocks disagree, no expired lease is handed over (docs/reliability.md).
      useFactory: async (config: LedgerConfig, store: EventStore, clocks?: InstanceClocks | null) => {
        const leases = await openLeaseStore(config, store);
        return clocks ? withTakeOverGate(leases, () => clocks.takeOversAllowed()) : leases;
      },
    },
    {
      provide: WorkFeed,
      inject: [
        LedgerService,
        READ_MODEL,
        LEASE_STORE,
        CLOCK,
        PROJECTION_ENGINE,
        APPEND_LISTENERS,
        CONFIG,
        { token: METRICS_REGISTRY, optional: true },
      ],
      useFactory: (
        ledger: LedgerService,
        readModel: ReadModel,
        leases: LeaseStore,
        clock: Clock,
        engine: ProjectionRunner,
        appended: Set<AppendListener>,
        config: LedgerConfig,
        registry?: Registry,
      ) => {
        // The metrics read the feed once it exists; it is made below, with the observer they return.
        let feed: WorkFeed | undefined;
        const observer = registry
          ? registerWorkMetrics(registry, {
              depth: (tenant) => (feed ? feed.depth(tenant) : []),
              now: () => clock.now().getTime(),
            })
          : {};
        // The feed's candidates are the step-state read model's rows: a waiting poll wakes when it moves.
        const stepState = [stepStateProjection.name];
        const settings = { ...DEFAULT_WORK_FEED_SETTINGS, pollMs: config.workPollMs };
        feed = new WorkFeed(ledger, readModel, leases, clock, observer, settings, {
          position: () => engine.position(stepState),
          waitForPosition: (position, timeoutMs) => engine.waitForPosition(position, timeoutMs, stepState),
        });
        const made = feed;
        appended.add((_events, tenant, step) => made.noteChanged(tenant, step.operationRef, step.state, step.position));
        return feed;
      },
    },
    LeaseStoreLifecycle,
  ],
  exports: [WorkFeed, LEASE_STORE],
})
export class WorkModule {}
