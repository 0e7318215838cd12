/**
 * The decision and the append as spans, children of the request's server span, with attributes in
 * the ledger's own namespace (`recovery_ledger.*`). The fact types, the decision, the refusal code
 * and the revision say what the ledger did without carrying the operation_ref or any payload.
 * Without the SDK started these are the API's no-op spans.
 */
import { SpanStatusCode, trace, type Span } from '@opentelemetry/api';

const tracer = () => trace.getTracer('recovery-ledger');

export class DecisionSpan {
  private readonly span: Span;
  private ended = false;

  constructor(factTypes: string[], revision: number) {
    this.span = tracer().startSpan('recovery_ledger.decide', {
      attributes: { 'recovery_ledger.fact_type': factTypes, 'recovery_ledger.revision': revision },
    });
  }

  /** `accepted`, `replayed`, `refused` (with its code) or `duplicate` (an idempotent resubmit). */
  end(decision: string, refusalCode?: string): void {
    if (this.ended) return;
    this.ended = true;
    this.span.setAttribute('recovery_ledger.decision', decision);
    if (refusalCode) this.span.setAttribute('recovery_ledger.refusal_code', refusalCode);
    this.span.end();
  }

  /** A throw while deciding: a fact refused before the decider (a problem with its code), or a failure. */
  fail(error: unknown): void {
    if (this.ended) return;
    const code = (error as { code?: unknown })?.code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(code)) return this.end('refused', code);
    this.span.setAttribute('error.type', errorType(error));
    this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.end('error');
  }
}

function errorType(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : typeof error;
}

/** The append as a span: how many events, the revision it made, and the store's commit time. */
export async function tracedAppend<T extends { revision: number }>(
  events: number,
  append: () => Promise<T>,
): Promise<T> {
  const span = tracer().startSpan('recovery_ledger.append', { attributes: { 'recovery_ledger.events': events } });
  const started = performance.now();
  try {
    const result = await append();
    span.setAttributes({
      'recovery_ledger.revision': result.revision,
      'recovery_ledger.store_commit_ms': performance.now() - started,
    });
    return result;
  } catch (error) {
    span.setAttributes({
      'error.type': errorType(error),
      'recovery_ledger.store_commit_ms': performance.now() - started,
    });
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}
