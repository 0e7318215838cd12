import { Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { createLedgerMetrics, LEDGER_METRICS, type LedgerMetrics } from '../observability/ledger-metrics';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { openEventStore } from '../store/store.factory';
import { CLOCK, systemClock, type Clock } from './clock';
import { LedgerService } from './ledger.service';

export interface LedgerModuleOptions {
  config: LedgerConfig;
  /** Tests pass a store or a clock of their own; production uses the configured ones. */
  store?: EventStore;
  clock?: Clock;
}

class StoreLifecycle implements OnApplicationShutdown {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  async onApplicationShutdown(): Promise<void> {
    // The HTTP server has stopped taking requests; queued appends commit before the file closes.
    await this.store.close();
  }
}

@Module({})
export class LedgerModule {
  static register(options: LedgerModuleOptions): DynamicModule {
    return {
      module: LedgerModule,
      global: true,
      providers: [
        { provide: CONFIG, useValue: options.config },
        { provide: CLOCK, useValue: options.clock ?? systemClock },
        // Optional: without the observability module (a module test) the hooks count nothing.
        { provide: LEDGER_METRICS, inject: [{ token: METRICS_REGISTRY, optional: true }], useFactory: (registry?: Registry) => createLedgerMetrics(registry) },
        options.store
          ? { provide: EVENT_STORE, useValue: options.store }
          : {
              provide: EVENT_STORE,
              inject: [LEDGER_METRICS],
              useFactory: (metrics: LedgerMetrics) => openEventStore(options.config, metrics.storeHooks),
            },
        {
          provide: LedgerService,
          inject: [EVENT_STORE, CLOCK, CONFIG, LEDGER_METRICS],
          useFactory: (store: EventStore, clock: Clock, config: LedgerConfig, metrics: LedgerMetrics) =>
            new LedgerService(
              store,
              clock,
              {
                envelopeLimits: config.envelopeLimits,
                defaultPolicy: config.defaultPolicy,
                maxConflictRetries: config.maxConflictRetries,
              },
              metrics.observer,
            ),
        },
        StoreLifecycle,
      ],
      exports: [CONFIG, CLOCK, EVENT_STORE, LedgerService],
    };
  }
}
