import { Module, type DynamicModule } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { createLedgerMetrics, LEDGER_METRICS, type LedgerMetrics } from '../observability/ledger-metrics';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { openEventStore } from '../adapters/store.factory';
import { CLOCK, type Clock } from '../shared/clock';
import { HistoryRollbackCheck } from '../integrity/history-rollback.check';
import { IntegrityMonitor } from '../integrity/integrity-monitor';
import { adoptionHooks } from '../integrity/log-adoption';
import { StoreLifecycle } from '../integrity/store-lifecycle';
import { INSTANCE_CLOCKS, type InstanceClocks } from './instance-clocks';
import { instanceClocks, InstanceClocksLifecycle } from './instance-clocks.lifecycle';
import {
  APPEND_LISTENERS,
  observerWithListeners,
  REFUSAL_LISTENERS,
  type AppendListener,
  type RefusalListener,
} from './ledger-observer';
import { LedgerService } from './ledger.service';
import { SubmitCommandHandler } from './submit-command.handler';
import { stepIndexer } from './step-index';

export interface LedgerModuleOptions {
  config: LedgerConfig;
  /** Tests pass a store or a clock of their own; production uses the configured ones. */
  store?: EventStore;
  clock?: Clock;
}

@Module({})
export class LedgerModule {
  static register(options: LedgerModuleOptions): DynamicModule {
    return {
      module: LedgerModule,
      global: true,
      providers: [
        { provide: CONFIG, useValue: options.config },
        // Optional: without the observability module (a module test) the hooks count nothing.
        {
          provide: LEDGER_METRICS,
          inject: [{ token: METRICS_REGISTRY, optional: true }],
          useFactory: (registry?: Registry) => createLedgerMetrics(registry),
        },
        // Null when a test injects its clock: there is then no shared time to agree on.
        {
          provide: INSTANCE_CLOCKS,
          inject: [LEDGER_METRICS],
          useFactory: (metrics: LedgerMetrics) => (options.clock ? null : instanceClocks(options.config, metrics)),
        },
        {
          provide: CLOCK,
          inject: [INSTANCE_CLOCKS],
          useFactory: (clocks: InstanceClocks | null) => options.clock ?? (clocks as InstanceClocks).clock,
        },
        options.store
          ? { provide: EVENT_STORE, useValue: options.store }
          : {
              provide: EVENT_STORE,
              inject: [LEDGER_METRICS],
              useFactory: (metrics: LedgerMetrics) =>
                openEventStore(options.config, { ...metrics.storeHooks, ...adoptionHooks(), indexer: stepIndexer }),
            },
        { provide: REFUSAL_LISTENERS, useFactory: () => new Set<RefusalListener>() },
        { provide: APPEND_LISTENERS, useFactory: () => new Set<AppendListener>() },
        {
          provide: IntegrityMonitor,
          inject: [EVENT_STORE, CLOCK, CONFIG],
          useFactory: (store: EventStore, clock: Clock, config: LedgerConfig) =>
            new IntegrityMonitor(store, () => clock.now(), config.anchorKey),
        },
        {
          provide: LedgerService,
          inject: [
            EVENT_STORE,
            CLOCK,
            CONFIG,
            LEDGER_METRICS,
            IntegrityMonitor,
            REFUSAL_LISTENERS,
            APPEND_LISTENERS,
            INSTANCE_CLOCKS,
          ],
          useFactory: (
            store: EventStore,
            clock: Clock,
            config: LedgerConfig,
            metrics: LedgerMetrics,
            integrity: IntegrityMonitor,
            listeners: Set<RefusalListener>,
            appendListeners: Set<AppendListener>,
            clocks: InstanceClocks | null,
          ) =>
            new LedgerService(
              store,
              clock,
              {
                envelopeLimits: config.envelopeLimits,
                defaultPolicy: config.defaultPolicy,
                maxConflictRetries: config.maxConflictRetries,
                maxStreamEvents: config.maxStreamEvents,
              },
              observerWithListeners(metrics.observer, appendListeners, listeners),
              integrity,
              undefined,
              // Windows another instance may have started are judged against its clock (docs/reliability.md).
              clocks ?? undefined,
            ),
        },
        {
          provide: SubmitCommandHandler,
          inject: [LedgerService],
          useFactory: (ledger: LedgerService) => ledger.commands,
        },
        HistoryRollbackCheck,
        StoreLifecycle,
        InstanceClocksLifecycle,
      ],
      exports: [
        CONFIG,
        CLOCK,
        INSTANCE_CLOCKS,
        EVENT_STORE,
        LedgerService,
        SubmitCommandHandler,
        IntegrityMonitor,
        REFUSAL_LISTENERS,
        APPEND_LISTENERS,
      ],
    };
  }
}
