/**
 * The built service as an operator runs it, one describe block per subject: SIGTERM under load,
 * and one trace across the runtime, the service and a provider process. Each block keeps its own
 * header, constants and hooks.
 */

import { randomUUID } from 'node:crypto';
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { callHttpTool, executeWrite, LedgerClient, LedgerWorker } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { startProviderProcess, type ProviderProcess } from '../support/provider-process';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { until } from '../support/until';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { runCli } from '../support/cli-harness';
import { fact, request } from '../support/http';

describe('one trace, runtime to ledger to provider', () => {
  /**
   * One trace, runtime → ledger → provider, with the real OpenTelemetry SDK on both sides: the
   * runtime (this process, an in-memory exporter) calls executeWrite; the built service exports its
   * spans by OTLP/HTTP to a receiver on loopback; the example invoice provider (a process of its
   * own) reports the traceparent it was sent.
   */
  const runtimeSpans = new InMemorySpanExporter();
  const runtime = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(runtimeSpans)] });
  const SERVER = 2;
  const KEY = 'ops-tracing-runtime-key-0001';
  const GITLAB = SECRET_CORPUS.find(([what]) => what === 'gitlab token')![1];

  describe('OpenTelemetry traces across runtime, ledger and provider', () => {
    let receiver: OtlpReceiver;
    let ledger: LedgerProcess;
    let provider: ProviderProcess;
    let client: LedgerClient;

    beforeAll(async () => {
      runtime.register();
      receiver = await startOtlpReceiver();
      [ledger, provider] = await Promise.all([
        startLedger({
          env: {
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.endpoint,
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
            OTEL_SERVICE_NAME: 'ledger-under-test',
            OTEL_BSP_SCHEDULE_DELAY: '100',
            LEDGER_API_KEYS: `${KEY}:runtime:acme`,
          },
          // Loading the SDK and its exporters adds CPU to the start; a loaded machine needs the margin.
          timeoutMs: 50_000,
        }),
        startProviderProcess(),
      ]);
      client = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: KEY });
    }, 60_000);
    afterAll(async () => {
      await Promise.all([ledger?.stop(), provider?.stop()]);
      await receiver?.close();
      await runtime.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    });

    it('the ledger continues the runtime trace: server spans under execute_tool, decide and append under them, the provider in it too', async () => {
      const ref = 'run_trace/step_1';
      const turn = runtime.getTracer('agent').startSpan('agent turn');
      const outcome = await context.with(trace.setSpan(context.active(), turn), () =>
        executeWrite(
          client,
          {
            operationRef: ref,
            runId: 'run_trace',
            tool: 'create_invoice',
            input: { customer_id: 'cus_42', amount_cents: 1200, currency: 'EUR' },
          },
          (input, call) =>
            callHttpTool(
              { url: `${provider.url}/invoices`, body: input, ...(call.signal ? { signal: call.signal } : {}) },
              { operationRef: call.operationRef, sideEffect: 'write' },
            ),
        ),
      );
      turn.end();
      expect(outcome).toMatchObject({ kind: 'recorded', status: 'succeeded' });
      const tool = runtimeSpans.getFinishedSpans().find((span) => span.name === 'execute_tool create_invoice')!;
      const traceId = turn.spanContext().traceId;
      expect(tool.spanContext().traceId).toBe(traceId);

      // The ledger's spans arrive by OTLP: plan, dispatch and envelope are three submits.
      const inTrace = () => receiver.spans.filter((span) => span.traceId === traceId);
      const spans = await until(
        async () => inTrace(),
        (found) => found.filter((span) => span.name === 'recovery_ledger.append').length >= 3,
        'the ledger spans of the trace',
      );
      const servers = spans.filter((span) => span.kind === SERVER);
      expect(servers.length).toBeGreaterThanOrEqual(3);
      for (const server of servers) {
        expect(server.service).toBe('ledger-under-test');
        expect(server.parentSpanId).toBe(tool.spanContext().spanId);
        expect(server.name).toBe('POST /v1/operations/:ref/events');
        expect(server.attributes).toMatchObject({
          'http.request.method': 'POST',
          'http.route': '/v1/operations/:ref/events',
          'http.response.status_code': 200,
        });
      }
      const serverIds = new Set(servers.map((span) => span.spanId));
      const decides = spans.filter((span) => span.name === 'recovery_ledger.decide');
      const appends = spans.filter((span) => span.name === 'recovery_ledger.append');
      for (const child of [...decides, ...appends]) expect(serverIds.has(child.parentSpanId)).toBe(true);
      const facts = decides.map((span) => span.attributes['recovery_ledger.fact_type']);
      expect(facts).toEqual(expect.arrayContaining([['StepPlanned'], ['AttemptDispatched'], ['EnvelopeRecorded']]));
      expect(decides.every((span) => span.attributes['recovery_ledger.decision'] === 'accepted')).toBe(true);
      for (const append of appends) {
        expect(append.attributes['recovery_ledger.revision']).toEqual(expect.any(Number));
        expect(append.attributes['recovery_ledger.store_commit_ms']).toEqual(expect.any(Number));
      }
      // Never the operation_ref: the server span is named by the route pattern.
      expect(JSON.stringify(spans)).not.toContain('run_trace/step_1');
      expect(JSON.stringify(spans)).not.toContain('run_trace%2Fstep_1');

      // The provider was sent the runtime's tool span as the parent: the same trace.
      const seen = (await (await fetch(`${provider.url}/__requests`)).json()) as {
        traceparents: Record<string, string[]>;
      };
      expect(seen.traceparents[ref]).toEqual([`00-${traceId}-${tool.spanContext().spanId}-01`]);

      // The runtime's traceparent is kept in the event metadata as the ledger received it.
      const events = await client.getEvents(ref);
      expect(events.events[0].traceparent).toMatch(new RegExp(`^00-${traceId}-`));
    });

    it('the worker: an execute_tool span per dispatch, the ledger and the provider under it', async () => {
      const ref = 'run_trace/worker_1';
      runtimeSpans.reset();
      const stop = new AbortController();
      const worker = new LedgerWorker(client, {
        tools: {
          create_invoice: {
            call: (input, call) =>
              callHttpTool(
                { url: `${provider.url}/invoices`, body: input, ...(call.signal ? { signal: call.signal } : {}) },
                { operationRef: call.operationRef, sideEffect: 'write' },
              ),
            lookup: async () => ({ found: false }),
          },
        },
        concurrency: 1,
        waitMs: 200,
        signal: stop.signal,
      });
      const running = worker.run();
      try {
        await client.startStep({
          operationRef: ref,
          runId: 'run_trace',
          tool: 'create_invoice',
          input: { customer_id: 'cus_42', amount_cents: 900, currency: 'EUR' },
        });
        await until(
          () => client.getOperation(ref),
          (state) => state.status === 'succeeded',
          'the worker to finish the step',
        );
      } finally {
        stop.abort();
        await running;
      }
      const tool = runtimeSpans.getFinishedSpans().find((span) => span.name === 'execute_tool create_invoice')!;
      expect(tool.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'recovery_ledger.attempt': 1,
        'recovery_ledger.commit_state': 'committed',
      });
      const traceId = tool.spanContext().traceId;
      const servers = await until(
        async () => receiver.spans.filter((span) => span.traceId === traceId && span.kind === SERVER),
        (found) => found.length >= 2,
        'the server spans of the dispatch and the envelope',
      );
      for (const server of servers) expect(server.parentSpanId).toBe(tool.spanContext().spanId);
      const seen = (await (await fetch(`${provider.url}/__requests`)).json()) as {
        traceparents: Record<string, string[]>;
      };
      expect(seen.traceparents[ref]).toEqual([`00-${traceId}-${tool.spanContext().spanId}-01`]);
    });

    it('a refusal: the decide span carries the refusal code, under the caller trace', async () => {
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const ref = 'run_trace/step_2';
      await client.planStep(ref, {
        run_id: 'run_trace',
        tool: 'create_invoice',
        side_effect: 'write',
        input_hash: 'a'.repeat(64),
      });
      // Attempt 2 asked for before attempt 1: the decider refuses it.
      const refused = await client
        .dispatchAttempt(ref, { attempt: 2, input_hash: 'a'.repeat(64) }, { traceparent })
        .catch((error: unknown) => error);
      const problem = refused as { code: string };
      expect(problem.code).toEqual(expect.stringMatching(/^[A-Z_]+$/));
      const [decide] = await until(
        async () =>
          receiver.spans.filter(
            (span) => span.traceId === '0af7651916cd43dd8448eb211c80319c' && span.name === 'recovery_ledger.decide',
          ),
        (found) => found.length > 0,
        'the refused decision span',
      );
      expect(decide.attributes).toMatchObject({
        'recovery_ledger.decision': 'refused',
        'recovery_ledger.refusal_code': problem.code,
      });
      const server = receiver.spans.find((span) => span.spanId === decide.parentSpanId)!;
      expect(server.parentSpanId).toBe('b7ad6b7169203331');
    });
    it("a caller's tracestate is never exported: not from a request with no key, a wrong key or a refused submit, nor from an accepted one", async () => {
      const traceId = () => randomUUID().replace(/-/g, '');
      const submit = (trace: string, key: string | undefined, tracestate: string, runId = 'run_state') =>
        fetch(`${ledger.baseUrl}/v1/operations/${encodeURIComponent(`run_state/${trace.slice(0, 8)}`)}/events`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            traceparent: `00-${trace}-00f067aa0ba902b7-01`,
            tracestate,
            ...(key ? { authorization: `Bearer ${key}` } : {}),
          },
          body: JSON.stringify({
            events: [
              {
                event_id: randomUUID(),
                type: 'StepPlanned',
                data: { run_id: runId, tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in-1' },
              },
            ],
          }),
        });
      const cases = [
        { what: 'no key', trace: traceId(), key: undefined, status: 401 },
        { what: 'wrong key', trace: traceId(), key: 'not-a-key-of-this-service', status: 401 },
        // The token in the tracestate is refused as an identifier: nothing of the submit is stored.
        { what: 'refused submit', trace: traceId(), key: KEY, status: 422 },
        { what: 'refused fact', trace: traceId(), key: KEY, status: 400, runId: 'two words' },
      ];
      const answered: Array<{ what: string; status: number }> = [];
      for (const { what, trace, key, runId } of cases)
        answered.push({ what, status: (await submit(trace, key, `vendor=${GITLAB}`, runId)).status });
      const accepted = traceId();
      answered.push({ what: 'accepted', status: (await submit(accepted, KEY, 'congo=t61rcWkgMzE')).status });
      expect(answered).toEqual([
        ...cases.map(({ what, status }) => ({ what, status })),
        { what: 'accepted', status: 200 },
      ]);

      // A request refused 401 by the early key check may end before its span starts; the others each
      // have a server span, and the last one sent (the accepted) is exported after the earlier ones.
      const traces = new Set([...cases.map((c) => c.trace), accepted]);
      const answeredPast401 = [...cases.filter((c) => c.status !== 401).map((c) => c.trace), accepted];
      const spans = await until(
        async () => receiver.spans.filter((span) => traces.has(span.traceId)),
        (found) =>
          answeredPast401.every((trace) => found.some((span) => span.traceId === trace && span.kind === SERVER)),
        'a server span of every request answered past the key check',
      );
      expect(spans.filter((span) => span.traceState !== '').map((span) => `${span.name}: ${span.traceState}`)).toEqual(
        [],
      );
      expect(receiver.bodies.filter((body) => body.includes(GITLAB) || body.includes('t61rcWkgMzE')).length).toBe(0);
    });
  });
});

describe('SIGTERM while runtimes are submitting', () => {
  /**
   * SIGTERM while runtimes are submitting: the service stops taking new requests, finishes the
   * appends it has accepted, lets the projection engine end its batch, and exits. Every write it
   * acknowledged (a 200) is in the log afterwards, and the projections, once restarted, count each
   * operation exactly once.
   */
  /** The service's read model file (READ_MODEL_FILE of src/projection-engine/projections.module.ts, whose NestJS imports jest cannot load). */
  const READ_MODEL_FILE = 'read-models.sqlite';

  const WORKERS = 24;
  const ACKS_BEFORE_SIGTERM = 300;

  interface Ack {
    ref: string;
    event_id: string;
  }

  let ledger: LedgerProcess;

  afterAll(() => ledger?.cleanup());

  function storedLog(dataDir: string): { ids: Set<string>; head: number } {
    const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const rows = db.prepare('SELECT event_id, position FROM events').all() as Array<{
        event_id: string;
        position: number;
      }>;
      return { ids: new Set(rows.map((row) => row.event_id)), head: Math.max(0, ...rows.map((row) => row.position)) };
    } finally {
      db.close();
    }
  }

  describe('graceful shutdown', () => {
    it('loses no acknowledged write when SIGTERM arrives during load', async () => {
      ledger = await startLedger();
      const acks: Ack[] = [];
      const outcomes = { acknowledged: 0, refusedWhileClosing: 0, connectionErrors: 0 };
      let stop = false;
      let signalled: () => void = () => undefined;
      const enoughLoad = new Promise<void>((resolve) => (signalled = resolve));

      const worker = async () => {
        while (!stop) {
          const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
          const event = fact('StepPlanned', {
            run_id: 'run_sigterm',
            tool: 'create_invoice',
            side_effect: 'write',
            input_hash: 'h1',
          });
          try {
            const answer = await request(ledger.baseUrl, 'POST', `/v1/operations/${encodeURIComponent(ref)}/events`, {
              events: [event],
            });
            if (answer.status === 200) {
              acks.push({ ref, event_id: event.event_id });
              outcomes.acknowledged += 1;
              if (acks.length >= ACKS_BEFORE_SIGTERM) signalled();
            } else if (answer.status === 503) {
              outcomes.refusedWhileClosing += 1;
            } else {
              throw new Error(`unexpected ${answer.status} ${JSON.stringify(answer.body)}`);
            }
          } catch (error) {
            if ((error as Error).message.startsWith('unexpected')) throw error;
            // The listener is gone: this request was never acknowledged, so nothing is owed for it.
            outcomes.connectionErrors += 1;
            if (ledger.child.exitCode !== null || ledger.child.signalCode !== null) return;
          }
        }
      };

      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        ledger.child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      const load = Promise.all(Array.from({ length: WORKERS }, worker));
      await enoughLoad;
      ledger.child.kill('SIGTERM');
      const exit = await exited;
      stop = true;
      await load;

      // It ended because it was asked to: by re-raising SIGTERM after the shutdown hooks, or exit 0.
      expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
      expect(ledger.output()).not.toMatch(/ERROR_DURING_SHUTDOWN|Error during shutdown/i);
      expect(outcomes.acknowledged).toBeGreaterThanOrEqual(ACKS_BEFORE_SIGTERM);

      const { ids: stored, head } = storedLog(ledger.dataDir);
      const lost = acks.filter((ack) => !stored.has(ack.event_id));
      expect(lost).toEqual([]);

      // Whatever the shutdown cut, what is stored is whole: every hash chain holds.
      const verify = runCli(['verify', '--data-dir', ledger.dataDir]);
      expect(verify.stdout).toMatch(/every hash chain holds/);
      expect(verify.status).toBe(0);

      // The read model was left at a batch boundary: after a restart the engine resumes from its
      // checkpoints and counts every stored operation once, none twice.
      const restarted = await ledger.restart();
      try {
        const trust = await request(
          restarted.baseUrl,
          'GET',
          `/v1/metrics/trust?wait_for_position=${head}&wait_timeout_ms=20000`,
        );
        expect(trust.status).toBe(200);
        // Two events per plan: the fact and its transition.
        expect(trust.body.overall.operations_planned).toBe(stored.size / 2);
      } finally {
        await restarted.stop();
      }
      const readModel = SqliteReadModel.open({ file: join(ledger.dataDir, READ_MODEL_FILE) });
      try {
        for (const projection of LEDGER_PROJECTIONS) readModel.register(projection);
        const steps = readModel.dump('step_state').docs.length;
        expect(steps).toBe(stored.size / 2);
      } finally {
        readModel.close();
      }
    });
  });
});
