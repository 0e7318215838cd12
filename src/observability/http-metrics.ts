import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Histogram, type Registry } from 'prom-client';

/** Seconds; from a cached read (~1 ms) to a submit behind a busy fsync, and the slow tail past it. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Request durations by tenant, route pattern and status. The route is Fastify's pattern
 * (`/v1/operations/:ref/events`), never the raw URL, so the label set stays bounded whatever
 * operation refs clients send; requests that match no route share one label.
 */
export function installHttpMetrics(app: NestFastifyApplication, registry: Registry): void {
  const histogram = new Histogram({
    name: 'ledger_http_request_duration_seconds',
    help: 'HTTP requests by method, route pattern and status code',
    // The caller's tenant, or "" for a request no key was resolved for (the metrics key sees those).
    labelNames: ['tenant', 'method', 'route', 'status_code'],
    buckets: BUCKETS,
    registers: [registry],
  });
  app
    .getHttpAdapter()
    .getInstance()
    .addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions?.url ?? 'unmatched';
      const tenant = (request as { caller?: { tenant?: string } }).caller?.tenant ?? '';
      histogram.observe(
        { tenant, method: request.method, route, status_code: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
      done();
    });
}
