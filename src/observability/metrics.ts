import { AsyncLocalStorage } from 'node:async_hooks';
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * The one Prometheus registry of the service (SPEC §7). Every module that measures something
 * registers its metrics here (`registers: [registry]`), so `GET /metrics` shows them all beside
 * the process metrics. A registry per application, not prom-client's global one, so that two
 * applications in one process (tests) never collide on metric names.
 */
export const METRICS_REGISTRY = Symbol('METRICS_REGISTRY');

export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

const tenantScope = new AsyncLocalStorage<{ tenant: string }>();

/**
 * Renders the exposition for one tenant's caller. Collectors of tenant data (trust metrics) read
 * the scope and report only that tenant (SPEC §8: tenant isolation holds on /metrics too).
 */
export function tenantExposition(registry: Registry, tenant: string): Promise<string> {
  return tenantScope.run({ tenant }, () => registry.metrics());
}

/** The tenant a scrape is for; undefined when the registry is read in-process, for every tenant. */
export function scrapeTenant(): string | undefined {
  return tenantScope.getStore()?.tenant;
}
