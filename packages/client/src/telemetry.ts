/**
 * OpenTelemetry for the client, as an optional peer: `@opentelemetry/api` is loaded once, lazily,
 * and when it is not installed nothing here does anything. The client has no runtime dependency,
 * so the few parts of the API it uses are typed here rather than imported.
 *
 * Spans follow the GenAI conventions for a tool call (`execute_tool {tool}`, `gen_ai.operation.name`,
 * `gen_ai.tool.name`, `error.type`); the ledger's own fields are `recovery_ledger.*`. The GenAI
 * execution guidance keeps idempotency keys out of telemetry: the operation_ref (which is the
 * provider's idempotency key) appears only as an HMAC under a key drawn once per process.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';

type Attributes = Record<string, string | number | boolean | string[] | undefined>;
type Context = object;

interface Span {
  setAttributes(attributes: Attributes): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

interface OtelApi {
  ROOT_CONTEXT: Context;
  SpanKind: { INTERNAL: number };
  SpanStatusCode: { ERROR: number };
  trace: {
    getTracer(
      name: string,
      version?: string,
    ): { startSpan(name: string, options: { kind: number; attributes?: Attributes }, context: Context): Span };
    getSpan(context: Context): Span | undefined;
    setSpan(context: Context, span: Span): Context;
  };
  context: { active(): Context; with<T>(context: Context, fn: () => T): T };
  propagation: {
    inject(context: Context, carrier: Record<string, string>): void;
    extract(context: Context, carrier: Record<string, string>): Context;
  };
}

const TRACER = '@recovery-ledger/client';
let loaded: OtelApi | null | undefined;

function otel(): OtelApi | null {
  if (loaded === undefined) {
    try {
      // Resolved from this file, as an installed peer would be; absent means tracing is off.
      loaded = createRequire(__filename)('@opentelemetry/api') as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

const hashKey = randomBytes(32);

/** An operation_ref (or any idempotency key) as telemetry may carry it: keyed, so not reversible by guessing. */
export function keyedHash(value: string): string {
  return createHmac('sha256', hashKey).update(value).digest('hex').slice(0, 32);
}

export interface TraceFields {
  traceparent?: string;
  tracestate?: string;
}

/** The W3C trace headers of the active context (the tool call's span, inside one); none without the API. */
export function traceHeaders(): TraceFields {
  const api = otel();
  if (!api) return {};
  const carrier: Record<string, string> = {};
  api.propagation.inject(api.context.active(), carrier);
  return {
    ...(carrier.traceparent ? { traceparent: carrier.traceparent } : {}),
    ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}),
  };
}

export interface ToolSpanRun<T> {
  /** Runs inside the span; `trace` is what to send the ledger so its spans are the span's children. */
  run: (trace: TraceFields) => Promise<T>;
  /** The span's attributes for what came back (`error.type` among them when it failed). */
  describe: (result: T) => Attributes;
}

/**
 * One `execute_tool {tool}` span around `run`. Its parent is the active span, or else the
 * runtime's own traceparent (continued, not replaced). A throw sets `error.type` to the error's name.
 */
export async function inToolSpan<T>(
  tool: string,
  parent: TraceFields,
  attributes: Attributes,
  { run, describe }: ToolSpanRun<T>,
): Promise<T> {
  const api = otel();
  if (!api) return run(parent);
  const active = api.context.active();
  const parentContext =
    api.trace.getSpan(active) === undefined && parent.traceparent
      ? api.propagation.extract(active, {
          traceparent: parent.traceparent,
          ...(parent.tracestate ? { tracestate: parent.tracestate } : {}),
        })
      : active;
  const span = api.trace.getTracer(TRACER).startSpan(
    `execute_tool ${tool}`,
    {
      kind: api.SpanKind.INTERNAL,
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool, ...attributes },
    },
    parentContext,
  );
  const spanContext = api.trace.setSpan(parentContext, span);
  try {
    const result = await api.context.with(spanContext, () => run(traceHeaders()));
    const described = describe(result);
    span.setAttributes(described);
    if (described['error.type'] !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR });
    return result;
  } catch (error) {
    const type = error instanceof Error ? error.name : typeof error;
    span.setAttributes({ 'error.type': type });
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: type });
    throw error;
  } finally {
    span.end();
  }
}
