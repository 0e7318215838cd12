import { Global, Module } from '@nestjs/common';
import { createMetricsRegistry, METRICS_REGISTRY } from './metrics';

/** Global, so any module can inject METRICS_REGISTRY and add its metrics without importing this. */
@Global()
@Module({
  providers: [{ provide: METRICS_REGISTRY, useFactory: createMetricsRegistry }],
  exports: [METRICS_REGISTRY],
})
export class ObservabilityModule {}
