import { Counter, Gauge, type Registry } from 'prom-client';
import { scrapeTenant } from '../observability/metrics';
import type { WebhookObserver } from './webhook.service';
import type { WebhookStore } from './webhook-store.port';

/**
 * Webhook deliveries on /metrics: attempts as they happen, and the outbox by status, read from the
 * durable store at scrape time (so the figures survive a restart) for the scraping key's tenant;
 * both by tenant, so one tenant's admin sees only its own (docs/security.md).
 */
export function registerWebhookMetrics(registry: Registry | undefined, store: WebhookStore): WebhookObserver {
  if (!registry) return {};
  const attempts = new Counter({
    name: 'ledger_webhook_attempts_total',
    help: 'Webhook POSTs by kind and outcome (delivered: 2xx; failed: will be retried; gave_up: no more retries)',
    labelNames: ['tenant', 'kind', 'outcome'],
    registers: [registry],
  });
  new Gauge({
    name: 'ledger_webhook_deliveries',
    help: 'Webhook deliveries in the outbox by kind and status (pending, delivered, failed)',
    labelNames: ['tenant', 'kind', 'status'],
    registers: [registry],
    async collect() {
      const rows = await store.counts(scrapeTenant());
      this.reset();
      for (const row of rows) this.inc({ tenant: row.tenant, kind: row.kind, status: row.status }, row.count);
    },
  });
  return { onAttempt: (tenant, kind, outcome) => attempts.inc({ tenant, kind, outcome }) };
}
