import { Global, Module, type OnApplicationShutdown } from '@nestjs/common';
import { createMetricsRegistry, METRICS_REGISTRY } from './metrics';
import { stopTracing } from './tracing';

/** Global, so any module can inject METRICS_REGISTRY and add its metrics without importing this. */
@Global()
@Module({
  providers: [{ provide: METRICS_REGISTRY, useFactory: createMetricsRegistry }],
  exports: [METRICS_REGISTRY],
})
export class ObservabilityModule implements OnApplicationShutdown {
  /** The spans of the last requests are exported before the process ends (graceful shutdown). */
  async onApplicationShutdown(): Promise<void> {
    await stopTracing();
  }
}
