import { Inject, Injectable, Logger, Module, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { CLOCK, type Clock } from '../ledger/clock';
import { REFUSAL_LISTENERS, type RefusalListener } from '../ledger/ledger.module';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { SqliteWebhookStore, webhookFile } from './sqlite-webhook.store';
import { registerWebhookMetrics } from './webhook-metrics';
import { loadWebhookSettings } from './webhook-settings';
import { WebhookService } from './webhook.service';
import { WEBHOOK_STORE, type WebhookStore } from './webhook-store.port';

/** Starts delivering once the application is up; stops before the log store closes. */
@Injectable()
class WebhooksLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  constructor(
    @Inject(WebhookService) private readonly service: WebhookService,
    @Inject(WEBHOOK_STORE) private readonly store: WebhookStore,
    @Inject(REFUSAL_LISTENERS) private readonly listeners: Set<RefusalListener>,
  ) {}

  private readonly listener: RefusalListener = (code, where) => this.service.onRefused(code, where.tenant, where.operationRef);

  onApplicationBootstrap(): void {
    this.listeners.add(this.listener);
    this.service.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.listeners.delete(this.listener);
    await this.service.stop();
  }

  onApplicationShutdown(): void {
    this.store.close();
  }
}

@Module({
  providers: [
    { provide: WEBHOOK_STORE, inject: [CONFIG], useFactory: (config: LedgerConfig) => new SqliteWebhookStore(webhookFile(config.dataDir)) },
    {
      provide: WebhookService,
      inject: [EVENT_STORE, WEBHOOK_STORE, CLOCK, { token: METRICS_REGISTRY, optional: true }],
      useFactory: (log: EventStore, store: WebhookStore, clock: Clock, registry?: Registry) => {
        const logger = new Logger('Webhooks');
        const metrics = registerWebhookMetrics(registry, store);
        return new WebhookService(log, store, clock, loadWebhookSettings(process.env), {
          ...metrics,
          onError: (error, where) => logger.error({ err: error, where }, 'webhook work failed; it is retried'),
        });
      },
    },
    WebhooksLifecycle,
  ],
  exports: [WebhookService, WEBHOOK_STORE],
})
export class WebhooksModule {}
