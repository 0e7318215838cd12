/**
 * OpenTelemetry traces for the service. The Node SDK (OTLP/HTTP exporter) starts only when a
 * standard `OTEL_*` exporter variable is set, and configures itself from them; otherwise the API
 * stays a no-op and no hook is installed. Spans are made here, not by instrumentation packages:
 * a server span per request continuing the caller's W3C `traceparent`, and (ledger-spans.ts) the
 * decision and the append under it.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
} from '@opentelemetry/api';
import type { NodeSDK } from '@opentelemetry/sdk-node';
import type { FastifyRequest } from 'fastify';

const EXPORTER_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_TRACES_EXPORTER',
];

let sdk: NodeSDK | undefined;

/** Whether an exporter is configured: any of the standard variables set (and the SDK not disabled). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  if (env.OTEL_TRACES_EXPORTER?.trim() === 'none') return false;
  return EXPORTER_VARIABLES.some((name) => (env[name] ?? '').trim() !== '');
}

/** Starts the SDK when configured; before NestJS and Fastify load, so their first request is traced. */
export function startTracing(env: NodeJS.ProcessEnv = process.env): boolean {
  if (sdk || !tracingConfigured(env)) return sdk !== undefined;
  // Loaded only when configured: the SDK and its exporters cost about a second of CPU at every start.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { NodeSDK: Sdk } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  sdk = new Sdk({
    serviceName: env.OTEL_SERVICE_NAME ?? 'recovery-ledger',
    // No instrumentation packages: the spans are the service's own (installTracing, ledger-spans).
    instrumentations: [],
  });
  sdk.start();
  return true;
}

/** Flushes and stops the exporter (graceful shutdown): the last requests' spans are not lost. */
export async function stopTracing(): Promise<void> {
  const running = sdk;
  sdk = undefined;
  await running?.shutdown().catch(() => undefined);
}

export const tracingStarted = (): boolean => sdk !== undefined;

interface RequestTrace {
  span: Span;
  context: Context;
}

const traces = new WeakMap<FastifyRequest, RequestTrace>();

/**
 * The caller's context without its `tracestate`: the span starts before the key is checked and
 * the submit is scanned, and a span carries its parent's trace state to the exporter, so a client's
 * tracestate (a token in it, from a request with no key or a refused one) would leave the service
 * on every span. The trace is continued by its `traceparent` alone; an accepted submit's
 * tracestate, once the secret detector has passed it, is recorded in the event metadata.
 */
function withoutTraceState(parent: Context): Context {
  const spanContext = trace.getSpanContext(parent);
  if (spanContext?.traceState === undefined) return parent;
  return trace.setSpanContext(parent, { ...spanContext, traceState: undefined });
}

/**
 * A server span per request, named by its route pattern (never the raw URL: it carries
 * operation refs), whose parent is the caller's `traceparent`. The handler runs in its context
 * (set at preHandler, after the body is read), so the decision's spans are its children.
 */
export function installTracing(app: NestFastifyApplication): void {
  if (!tracingStarted()) return;
  const tracer = trace.getTracer('recovery-ledger');
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onRequest', (request, _reply, done) => {
    const parent = withoutTraceState(propagation.extract(ROOT_CONTEXT, request.headers));
    const route = request.routeOptions?.url;
    const span = tracer.startSpan(
      route ? `${request.method} ${route}` : request.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          ...(route ? { 'http.route': route } : {}),
          'url.scheme': 'http',
        },
      },
      parent,
    );
    traces.set(request, { span, context: trace.setSpan(parent, span) });
    done();
  });
  fastify.addHook('preHandler', (request, _reply, done) => {
    const held = traces.get(request);
    if (held) context.with(held.context, done);
    else done();
  });
  const end = (request: FastifyRequest, status: number | undefined, aborted: boolean) => {
    const held = traces.get(request);
    if (!held) return;
    traces.delete(request);
    if (status !== undefined) held.span.setAttribute('http.response.status_code', status);
    if (aborted) held.span.setAttribute('error.type', 'aborted');
    else if (status !== undefined && status >= 500) held.span.setAttribute('error.type', String(status));
    if (aborted || (status !== undefined && status >= 500)) held.span.setStatus({ code: SpanStatusCode.ERROR });
    held.span.end();
  };
  fastify.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode, false);
    done();
  });
  fastify.addHook('onRequestAbort', (request, done) => {
    end(request, undefined, true);
    done();
  });
}
