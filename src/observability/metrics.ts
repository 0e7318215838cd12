import { AsyncLocalStorage } from 'node:async_hooks';
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * The one Prometheus registry of the service (docs/contract.md §7). Every module that measures something
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
 * Renders the exposition for one tenant's admin: only the samples labelled with that tenant
 * (docs/contract.md §8: no route tells one tenant anything of another's activity). Process-wide
 * series (memory, CPU, the event loop, group commits, projection lag, requests no key was resolved
 * for) carry no tenant and show every tenant's load together, so they are left out here and
 * served only to a metrics key. Collectors of tenant data (trust metrics) also read the scope, so
 * they do not compute other tenants' series at all.
 */
/**
 * What one scrape sees: a metrics key belongs to no tenant and sees every series, process-wide ones
 * included; so does local mode's one caller, the only user of its process. A tenant's admin sees
 * that tenant's series only.
 */
export function expositionFor(registry: Registry, scope: { tenant: string; everyTenant: boolean }): Promise<string> {
  return scope.everyTenant ? registry.metrics() : tenantExposition(registry, scope.tenant);
}

export async function tenantExposition(registry: Registry, tenant: string): Promise<string> {
  const text = await tenantScope.run({ tenant }, () => registry.metrics());
  return onlyTenant(text, tenant);
}

/**
 * Keeps a family's HELP and TYPE lines when at least one of its samples is kept. Label values are
 * escaped in the text format (a `"` inside one is `\"`), so `tenant="acme"` after `{` or `,` can
 * only be the tenant label itself; tenant ids are `[a-z0-9_-]` and need no escaping.
 */
export function onlyTenant(exposition: string, tenant: string): string {
  const label = new RegExp(`[{,]tenant="${tenant}"[,}]`);
  const out: string[] = [];
  let header: string[] = [];
  for (const line of exposition.split('\n')) {
    if (line.startsWith('# HELP ')) header = [line];
    else if (line.startsWith('# TYPE ')) header.push(line);
    else if (line !== '' && label.test(line)) {
      out.push(...header, line);
      header = [];
    }
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

/** The tenant a scrape is for; undefined when the registry is read in-process, for every tenant. */
export function scrapeTenant(): string | undefined {
  return tenantScope.getStore()?.tenant;
}
