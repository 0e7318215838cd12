import { Inject, Logger, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { createLedgerMetrics, LEDGER_METRICS, type LedgerMetrics } from '../observability/ledger-metrics';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { openEventStore } from '../store/store.factory';
import { CLOCK, systemClock, type Clock } from './clock';
import { LedgerService, type LedgerObserver } from './ledger.service';

/**
 * Other modules that must hear of refusals (webhooks count premature lookups, which the log does
 * not record) add a listener here; it runs before the refusal is answered.
 */
export type RefusalListener = NonNullable<LedgerObserver['onRefused']>;
export const REFUSAL_LISTENERS = Symbol('REFUSAL_LISTENERS');
const refusalLogger = new Logger('LedgerService');

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
        { provide: REFUSAL_LISTENERS, useFactory: () => new Set<RefusalListener>() },
        {
          provide: LedgerService,
          inject: [EVENT_STORE, CLOCK, CONFIG, LEDGER_METRICS, REFUSAL_LISTENERS],
          useFactory: (store: EventStore, clock: Clock, config: LedgerConfig, metrics: LedgerMetrics, listeners: Set<RefusalListener>) =>
            new LedgerService(
              store,
              clock,
              {
                envelopeLimits: config.envelopeLimits,
                defaultPolicy: config.defaultPolicy,
                maxConflictRetries: config.maxConflictRetries,
              },
              {
                ...metrics.observer,
                onRefused: (code, where) => {
                  metrics.observer.onRefused?.(code, where);
                  for (const listener of listeners) {
                    // A listener's fault must not turn the caller's refusal into a 500.
                    try {
                      listener(code, where);
                    } catch (error) {
                      refusalLogger.error({ err: error, code }, 'a refusal listener failed');
                    }
                  }
                },
              },
            ),
        },
        StoreLifecycle,
      ],
      exports: [CONFIG, CLOCK, EVENT_STORE, LedgerService, REFUSAL_LISTENERS],
    };
  }
}
