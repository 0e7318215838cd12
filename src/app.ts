import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Logger } from 'nestjs-pino';
import type { Registry } from 'prom-client';
import { AppModule, type AppOptions } from './app.module';
import { sendProblem, toLedgerError } from './http/problem.filter';
import { installSecurity } from './http/security/install-security';
import { installHttpMetrics } from './observability/http-metrics';
import { installRequestIdEcho, requestIdOptions } from './logging/request-context';
import { METRICS_REGISTRY } from './observability/metrics';
import { mountOpenApi } from './openapi/openapi.module';

/**
 * Builds the application (used by main and by the tests, so both run the same wiring). `preview`
 * scans the modules without creating a provider (no store is opened, nothing is listened on): the
 * OpenAPI generator builds its document from such an application.
 */
export async function createApp(options: AppOptions, { preview = false }: { preview?: boolean } = {}): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: options.config.bodyLimitBytes,
    // Prototype pollution through JSON keys is refused at the parser, before any code sees the body.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    forceCloseConnections: false,
    // A 200-character operation_ref, percent-encoded, is up to 600 characters (Fastify's default is 100).
    // Under routerOptions: Fastify 5 deprecates the top-level option (warning FSTDEP022 at every start).
    routerOptions: { maxParamLength: 2048 },
    // Errors Fastify raises before routing (a malformed percent-encoding) answer as problems too.
    frameworkErrors: (error: Error, request: FastifyRequest, reply: FastifyReply) => sendProblem(reply, toLedgerError(error), request.url.split('?')[0]),
    ...requestIdOptions,
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.register(options), adapter, {
    // Startup lines wait for the JSON logger below, so every line the service writes is JSON.
    bufferLogs: !preview,
    logger: preview ? false : ['error', 'warn', 'log'],
    abortOnError: false,
    preview,
  });
  if (preview) return app;
  app.useLogger(app.get(Logger));
  installRequestIdEcho(app);
  installSecurity(app, options.config);
  installHttpMetrics(app, app.get<Registry>(METRICS_REGISTRY));
  mountOpenApi(app);
  app.enableShutdownHooks();
  return app;
}
