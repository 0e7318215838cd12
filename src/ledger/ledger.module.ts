import { Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
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
        options.store
          ? { provide: EVENT_STORE, useValue: options.store }
          : { provide: EVENT_STORE, useFactory: () => openEventStore(options.config) },
        {
          provide: LedgerService,
          inject: [EVENT_STORE, CLOCK, CONFIG],
          useFactory: (store: EventStore, clock: Clock, config: LedgerConfig) =>
            new LedgerService(store, clock, {
              envelopeLimits: config.envelopeLimits,
              defaultPolicy: config.defaultPolicy,
              maxConflictRetries: config.maxConflictRetries,
            }),
        },
        StoreLifecycle,
      ],
      exports: [CONFIG, CLOCK, EVENT_STORE, LedgerService],
    };
  }
}
