import {
  Inject,
  Injectable,
  Logger,
  Module,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { CLOCK, type Clock } from '../shared/clock';
import { REFUSAL_LISTENERS, type RefusalListener } from '../ledger/ledger-observer';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { openSharedWebhookStore, openWebhookFile } from '../adapters/store.factory';
import { webhookFile } from './webhook-store.port';
import { registerWebhookMetrics } from './webhook-metrics';
import { parseSecretKey } from './webhook-secret-box';
import { loadWebhookSettings } from './webhook-settings';
import { WebhookService } from './webhook.service';
import { WebhookSubscriptions } from './webhook-subscriptions';
import { WEBHOOK_STORE, type WebhookStore } from './webhook-store.port';

/** Starts delivering once the application is up; stops before the log store closes. */
@Injectable()
class WebhooksLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  constructor(
    @Inject(WebhookService) private readonly service: WebhookService,
    @Inject(WEBHOOK_STORE) private readonly store: WebhookStore,
    @Inject(REFUSAL_LISTENERS) private readonly listeners: Set<RefusalListener>,
  ) {}

  private readonly logger = new Logger('Webhooks');

  /**
   * The count is taken as the store answers: on a store in this instance's file that is before the
   * refusal is answered; a shared store is on the network, and the refusal is not held for it.
   */
  private readonly listener: RefusalListener = (code, where) => {
    this.service
      .onRefused(code, where.tenant, where.operationRef)
      .catch((error: unknown) => this.logger.error({ err: error, code }, 'a premature refusal was not counted'));
  };

  onApplicationBootstrap(): void {
    this.listeners.add(this.listener);
    this.service.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.listeners.delete(this.listener);
    await this.service.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}

/**
 * The webhook store (the PostgreSQL tables shared by the instances on LEDGER_STORE=postgres, else
 * the instance's webhook file), its signing secrets wrapped when LEDGER_WEBHOOK_SECRET_KEY is set;
 * said at start when they are not, since the store then holds every subscription's secret in plain
 * text (docs/webhooks.md, "Signing secrets at rest").
 */
async function openWebhookStore(config: LedgerConfig): Promise<ReturnType<typeof openWebhookFile>> {
  const logger = new Logger('Webhooks');
  const secretKey = parseSecretKey(process.env.LEDGER_WEBHOOK_SECRET_KEY);
  const shared = await openSharedWebhookStore(config, { secretKey });
  const file = shared ? 'PostgreSQL (ledger_webhook_subscriptions)' : webhookFile(config.dataDir);
  const store = shared ?? openWebhookFile(file, { secretKey });
  const atRest = store.secretsAtRest;
  if (!atRest.wrapped) {
    logger.warn(
      { setting: 'LEDGER_WEBHOOK_SECRET_KEY', file, plain_secrets: atRest.plain },
      'webhook signing secrets are stored in plain text: set LEDGER_WEBHOOK_SECRET_KEY (32 bytes, hex or base64) to wrap them',
    );
  } else if (atRest.newlyWrapped > 0) {
    logger.log(
      { file, wrapped: atRest.newlyWrapped },
      'wrapped the plain webhook signing secrets with LEDGER_WEBHOOK_SECRET_KEY',
    );
  }
  return store;
}

@Module({
  providers: [
    { provide: WEBHOOK_STORE, inject: [CONFIG], useFactory: (config: LedgerConfig) => openWebhookStore(config) },
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
    WebhookSubscriptions,
    WebhooksLifecycle,
  ],
  exports: [WebhookService, WebhookSubscriptions, WEBHOOK_STORE],
})
export class WebhooksModule {}
