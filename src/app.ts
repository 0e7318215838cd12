import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createServer, type RequestListener } from 'node:http';
import { getStorageToken, type ThrottlerStorage } from '@nestjs/throttler';
import { parseApiKeys } from './auth/api-keys';
import { installEarlyAuth } from './http/security/early-auth';
import { Logger } from 'nestjs-pino';
import type { Registry } from 'prom-client';
import { AppModule, type AppOptions } from './app.module';
import { sendProblem, toLedgerProblem } from './http/problem.filter';
import { installSecurity } from './http/security/install-security';
import { installHttpMetrics } from './observability/http-metrics';
import { installRequestIdCheck, installRequestIdEcho, requestIdOptions } from './logging/request-context';
import { tagRoutePatterns } from './logging/logged-path';
import { METRICS_REGISTRY } from './observability/metrics';
import { installTracing } from './observability/tracing';
import { mountOpenApi } from './openapi/openapi.module';

/**
 * Builds the application (used by main and by the tests, so both run the same wiring). `preview`
 * scans the modules without creating a provider (no store is opened, nothing is listened on): the
 * OpenAPI generator builds its document from such an application.
 */
export async function createApp(
  options: AppOptions,
  { preview = false }: { preview?: boolean } = {},
): Promise<NestFastifyApplication> {
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
    frameworkErrors: (error: Error, request: FastifyRequest, reply: FastifyReply) =>
      sendProblem(reply, toLedgerProblem(error), request.url.split('?')[0]),
    ...requestIdOptions,
    // Node's own timeouts, set on the server Node builds: the request line and headers within
    // LEDGER_HEADERS_TIMEOUT_MS, the whole request within LEDGER_REQUEST_TIMEOUT_MS, checked every
    // quarter of the first (Node checks every 30 s by default, which would let a slow socket
    // outlive a short limit by that much). A request past either is answered 408 and its socket closed.
    serverFactory: (handler: RequestListener) =>
      createServer(
        {
          headersTimeout: options.config.headersTimeoutMs,
          requestTimeout: Math.max(options.config.requestTimeoutMs, options.config.headersTimeoutMs),
          connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(options.config.headersTimeoutMs / 4))),
        },
        handler,
      ),
  });
  if (!preview) installRequestIdCheck(adapter.getInstance());
  // Before NestJS adds its middleware (the request logger among them): see tagRoutePatterns.
  tagRoutePatterns(adapter.getInstance());
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
  installEarlyAuth(
    app.getHttpAdapter().getInstance(),
    options.apiKeys ?? parseApiKeys(options.config.apiKeys),
    app.get<ThrottlerStorage>(getStorageToken()),
    options.config.rateLimitPerMinute,
  );
  installHttpMetrics(app, app.get<Registry>(METRICS_REGISTRY));
  installTracing(app);
  mountOpenApi(app);
  app.enableShutdownHooks();
  return app;
}
