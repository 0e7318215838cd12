/**
 * The gateway's traces with the real OpenTelemetry SDK (an in-memory exporter): the host's trace
 * context arrives in `params._meta`, each tool call is an `execute_tool {tool}` span in it, and the
 * upstream MCP server (the example invoice server, a real process) receives the call's trace in its
 * own `params._meta`. The ledger is the built service; the gateway runs in this process so its spans
 * can be read.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { McpGateway } from '../../packages/mcp-gateway/src/mcp-gateway';
import { parseGatewayConfig } from '../../packages/mcp-gateway/src/gateway-config';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { invoiceGatewayConfig, workspace, type Workspace } from '../support/mcp-gateway-harness';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const HOST_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const HOST_SPAN = '00f067aa0ba902b7';

const traceparentOf = (span: ReadableSpan) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;

describe('MCP gateway tracing', () => {
  let ledger: LedgerProcess;
  let space: Workspace;
  let gateway: McpGateway;
  let host: Client;

  beforeAll(async () => {
    provider.register();
    ledger = await startLedger();
    space = workspace();
    gateway = new McpGateway(
      parseGatewayConfig(invoiceGatewayConfig(space, { ledgerUrl: ledger.baseUrl }), 'gateway.json'),
    );
    await gateway.start();
    const [hostSide, gatewaySide] = InMemoryTransport.createLinkedPair();
    await gateway.server().connect(gatewaySide);
    host = new Client({ name: 'host', version: '1.0.0' });
    await host.connect(hostSide);
  }, 60_000);
  afterAll(async () => {
    await host?.close();
    await gateway?.close();
    await ledger?.stop();
    space?.cleanup();
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });
  beforeEach(() => exporter.reset());

  const call = (name: string, args: Record<string, unknown>) =>
    host.callTool({ name, arguments: args, _meta: { traceparent: `00-${HOST_TRACE}-${HOST_SPAN}-01` } });

  it('a write: the host trace continued, one execute_tool span, its context passed to the upstream server', async () => {
    const result = await call('create_invoice', {
      operation_ref: 'traced/create-1',
      customer_id: 'cus_42',
      amount_cents: 1200,
      currency: 'EUR',
    });
    expect(result.isError).toBeFalsy();
    const tools = exporter.getFinishedSpans().filter((span) => span.name.startsWith('execute_tool'));
    expect(tools.map((span) => span.name)).toEqual(['execute_tool create_invoice']);
    const [tool] = tools;
    expect(tool.spanContext().traceId).toBe(HOST_TRACE);
    expect(tool.parentSpanContext?.spanId).toBe(HOST_SPAN);
    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'create_invoice',
      'recovery_ledger.commit_state': 'committed',
      'recovery_ledger.attempt': 1,
    });
    expect(space.state.calls().create_invoice.traceparents).toEqual([traceparentOf(tool)]);
    for (const span of exporter.getFinishedSpans()) {
      expect(JSON.stringify([span.name, span.attributes, span.events])).not.toContain('traced/create-1');
    }
  });

  it('a read passes through in a span of its own, with error.type when the upstream answers an error', async () => {
    const result = await call('get_invoice', { invoice_id: 'inv_missing' });
    expect(result.isError).toBe(true);
    const [read] = exporter.getFinishedSpans().filter((span) => span.name === 'execute_tool get_invoice');
    expect(read.spanContext().traceId).toBe(HOST_TRACE);
    expect(read.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'get_invoice',
      'error.type': expect.any(String),
    });
    expect(space.state.calls().get_invoice.traceparents).toEqual([traceparentOf(read)]);
  });
});
