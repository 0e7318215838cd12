/**
 * The client's tool-call spans, with the real OpenTelemetry SDK (an in-memory exporter): the GenAI
 * conventions' names, the ledger's fields as recovery_ledger.*, no raw operation_ref anywhere, and
 * one trace from the runtime's span through the ledger's requests to the provider's.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { callHttpTool, executeWrite, LedgerClient, runAttempt, type WriteStep } from '@recovery-ledger/client';
import { startLoopbackLedger, type LoopbackLedger } from './support/loopback-ledger';

const REF = 'run_otel/step_1';
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

/** Every string an exported span carries: its name, attributes, events and status. */
function strings(span: ReadableSpan): string[] {
  return [
    span.name,
    span.status.message ?? '',
    ...Object.values(span.attributes).flat().map(String),
    ...span.events.map((event) => event.name),
  ];
}

describe('client telemetry', () => {
  let ledger: LedgerClient;
  let loopback: LoopbackLedger;
  let server: Server;
  let url: string;
  let answer = { status: 201, body: '{"id":"inv_1"}' };
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    provider.register();
    server = createServer((request, response) => {
      seen.push(request.headers);
      request.resume();
      request.on('end', () =>
        response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoices`;
  });
  afterAll(async () => {
    server.close();
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });
  beforeEach(async () => {
    exporter.reset();
    seen.length = 0;
    answer = { status: 201, body: '{"id":"inv_1"}' };
    loopback = await startLoopbackLedger();
    ledger = new LedgerClient({ baseUrl: loopback.baseUrl, sleep: async () => undefined });
  });
  afterEach(() => loopback.close());

  const step = (ref = REF): WriteStep<{ amount: number }> => ({
    operationRef: ref,
    runId: 'run_otel',
    tool: 'create_invoice',
    input: { amount: 1200 },
    policy: { max_attempts: 2, consistency_window_ms: 1000, verification_tool: 'get_invoice' },
  });
  const call = (input: { amount: number }, tool: { operationRef: string; signal?: AbortSignal }) =>
    callHttpTool(
      { url, body: input, ...(tool.signal ? { signal: tool.signal } : {}) },
      { operationRef: tool.operationRef, sideEffect: 'write' },
    );

  it('one execute_tool span per call, continuing the runtime span, with the trace passed to the ledger and the provider', async () => {
    const runtime = provider.getTracer('runtime').startSpan('agent turn');
    const outcome = await context.with(trace.setSpan(context.active(), runtime), () =>
      executeWrite(ledger, step(), call, { now: () => loopback.now() }),
    );
    runtime.end();
    expect(outcome).toMatchObject({ kind: 'recorded', status: 'succeeded' });

    const spans = exporter.getFinishedSpans();
    const tool = spans.find((span) => span.name === 'execute_tool create_invoice');
    expect(tool).toBeDefined();
    expect(spans.filter((span) => span.name.startsWith('execute_tool'))).toHaveLength(1);
    expect(tool!.parentSpanContext?.spanId).toBe(runtime.spanContext().spanId);
    expect(tool!.spanContext().traceId).toBe(runtime.spanContext().traceId);
    expect(tool!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'create_invoice',
      'recovery_ledger.outcome': 'recorded',
      'recovery_ledger.commit_state': 'committed',
      'recovery_ledger.attempt': 1,
      'recovery_ledger.next_action': 'none',
      'recovery_ledger.status': 'succeeded',
    });
    expect(tool!.attributes['error.type']).toBeUndefined();

    // The ledger's requests and the provider's carry the tool span as their parent: one trace.
    const parent = `00-${tool!.spanContext().traceId}-${tool!.spanContext().spanId}-01`;
    const ledgerTraces = loopback.requests
      .filter((request) => request.method === 'POST')
      .map((request) => request.headers.traceparent);
    expect(ledgerTraces.length).toBeGreaterThanOrEqual(3);
    expect(new Set(ledgerTraces)).toEqual(new Set([parent]));
    expect(seen.map((headers) => headers.traceparent)).toEqual([parent]);
  });

  it('a failed call sets error.type; an uncertain outcome carries its commit state and next action', async () => {
    answer = { status: 502, body: '<html>bad gateway</html>' };
    const outcome = await executeWrite(ledger, step(), call, { now: () => loopback.now() });
    expect(outcome.directive.next_action).toBe('verify_operation');
    const [tool] = exporter.getFinishedSpans().filter((span) => span.name.startsWith('execute_tool'));
    expect(tool.status.code).toBe(2);
    expect(tool.attributes).toMatchObject({
      'error.type': outcome.envelope && !outcome.envelope.ok ? outcome.envelope.code : 'missing',
      'recovery_ledger.commit_state': 'unknown',
      'recovery_ledger.next_action': 'verify_operation',
    });
  });

  it('a refusal sets error.type to the ledger code; a thrown ledger error to its name', async () => {
    await executeWrite(ledger, step(), call, { now: () => loopback.now() });
    exporter.reset();
    const refused = await runAttempt(
      ledger,
      {
        operationRef: REF,
        attempt: 1,
        inputHash: 'a'.repeat(64),
        input: { amount: 1 },
        sideEffect: 'write',
        tool: 'create_invoice',
      },
      call,
    );
    expect(refused.kind).not.toBe('recorded');
    const [span] = exporter.getFinishedSpans().filter((candidate) => candidate.name.startsWith('execute_tool'));
    expect(span.name).toBe('execute_tool create_invoice');
    expect(span.attributes['error.type']).toBe(refused.refusal?.code);

    exporter.reset();
    const offline = new LedgerClient({ baseUrl: 'http://127.0.0.1:1', sleep: async () => undefined, maxRetries: 0 });
    await expect(executeWrite(offline, step('run_otel/step_2'), call)).rejects.toThrow();
    const [thrown] = exporter.getFinishedSpans().filter((span) => span.name.startsWith('execute_tool'));
    expect(thrown.attributes['error.type']).toEqual(expect.any(String));
    expect(thrown.status.code).toBe(2);
  });

  it('never carries the operation_ref (the provider idempotency key) raw: a keyed hash at most', async () => {
    await executeWrite(ledger, step(), call, { now: () => loopback.now() });
    answer = { status: 502, body: '' };
    await executeWrite(ledger, step('run_otel/step_3'), call, { now: () => loopback.now() });
    // Every span this process made (the loopback ledger's decisions too) is free of the reference.
    for (const span of exporter.getFinishedSpans()) {
      for (const text of strings(span)) {
        expect(text).not.toContain('run_otel/step_');
        expect(text).not.toContain('step_1');
      }
    }
    const spans = exporter.getFinishedSpans().filter((span) => span.name.startsWith('execute_tool'));
    expect(spans).toHaveLength(2);
    for (const span of spans) expect(span.attributes['recovery_ledger.operation_ref_hash']).toMatch(/^[0-9a-f]{32}$/);
    const hashes = spans.map((span) => span.attributes['recovery_ledger.operation_ref_hash']);
    expect(new Set(hashes).size).toBe(2);
  });
});
