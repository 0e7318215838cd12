/**
 * The gateway's OpenTelemetry, in one module: the W3C trace context read from the host's
 * `params._meta` and passed on to upstream servers the same way (`traceparent`/`tracestate` keys),
 * and the `execute_tool {tool}` span of the calls that do not go through the ledger (read tools,
 * the gateway's own tools). Write tools get theirs from the client's executeWrite. Without an SDK
 * registered the API does nothing.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';

const tracer = () => trace.getTracer('@recovery-ledger/mcp-gateway');

/** The active trace context as MCP `_meta` entries; empty when nothing is traced. */
export function traceMeta(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  const meta: Record<string, string> = {};
  if (carrier.traceparent) meta.traceparent = carrier.traceparent;
  if (carrier.tracestate) meta.tracestate = carrier.tracestate;
  return meta;
}

/** Runs `fn` in the host's trace, when its request carried one in `params._meta`. */
export function inHostTrace<T>(meta: Record<string, unknown> | undefined, fn: () => T): T {
  if (typeof meta?.traceparent !== 'string') return fn();
  const carrier: Record<string, string> = { traceparent: meta.traceparent };
  if (typeof meta.tracestate === 'string') carrier.tracestate = meta.tracestate;
  return context.with(propagation.extract(context.active(), carrier), fn);
}

/** An `execute_tool {tool}` span (GenAI conventions) around a call the ledger does not see. */
export async function inToolSpan<T>(
  tool: string,
  fn: () => Promise<T>,
  describe: (result: T) => Attributes,
): Promise<T> {
  return tracer().startActiveSpan(
    `execute_tool ${tool}`,
    { kind: SpanKind.INTERNAL, attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool } },
    async (span) => {
      try {
        const result = await fn();
        const attributes = describe(result);
        span.setAttributes(attributes);
        if (attributes['error.type'] !== undefined) span.setStatus({ code: SpanStatusCode.ERROR });
        return result;
      } catch (error) {
        const type = error instanceof Error ? error.name : typeof error;
        span.setAttributes({ 'error.type': type });
        span.setStatus({ code: SpanStatusCode.ERROR, message: type });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
