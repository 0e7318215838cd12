/**
 * The cost of tracing: the built service under the figure-1 load (one StepPlanned per request, a
 * new operation each), first with no OTEL_* variable (the SDK never starts), then with an OTLP/HTTP
 * exporter configured (three spans per submit: the server span, the decision, the append) posting
 * to a collector stand-in on loopback that drains and discards. Same run, same machine; the ratio
 * is traced / untraced throughput, and the CPU per request says what the spans cost the server.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { measured, type HttpSettings, type Measured } from './http-submit.figure';
import { startLedger } from '../support/processes';
import type { FigureRow } from '../support/report';

/** Answers every OTLP export 200 after reading it, counting the bytes (the collector's side is not measured). */
async function startSink(): Promise<{
  endpoint: string;
  posts: () => number;
  bytes: () => number;
  close: () => Promise<void>;
}> {
  let posts = 0;
  let bytes = 0;
  const server = createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (bytes += chunk.length));
    request.on('end', () => {
      posts += 1;
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    posts: () => posts,
    bytes: () => bytes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const summary = ({ result, cpuMsPerRequest }: Measured) => ({
  rps: Number(result.rps.toFixed(0)),
  server_cpu_ms_per_request: Number(cpuMsPerRequest.toFixed(3)),
  p50_ms: result.latencyMs.p50,
  p99_ms: result.latencyMs.p99,
  ok: result.ok,
  non2xx: result.non2xx,
  errors: result.errors + result.timeouts,
});

export async function tracingOverheadFigure(settings: HttpSettings, log: (line: string) => void): Promise<FigureRow[]> {
  const job = (url: string, label: string) => ({
    url,
    connections: settings.connections,
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
    scenario: { kind: 'plan' as const, label },
  });
  log('  tracing overhead: the ledger untraced, then traced (OTLP/HTTP to a loopback sink)');
  const off = await startLedger(join(settings.dir, 'trace-off'), {}, settings.nodeArgs);
  let offm: Measured;
  try {
    offm = await measured(off, job(off.baseUrl, 'trace-off'), true);
  } finally {
    await off.stop();
  }
  const sink = await startSink();
  let onm: Measured;
  try {
    const on = await startLedger(
      join(settings.dir, 'trace-on'),
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sink.endpoint, OTEL_SERVICE_NAME: 'recovery-ledger-bench' },
      settings.nodeArgs,
    );
    try {
      onm = await measured(on, job(on.baseUrl, 'trace-on'), true);
    } finally {
      await on.stop();
    }
  } finally {
    await sink.close();
  }
  const ratio = onm.result.rps / offm.result.rps;
  return [
    {
      id: 'T',
      name: 'Tracing on / off, HTTP submit (figure 1 load)',
      figure: { label: 'traced', value: onm.result.rps, unit: 'req/s' },
      baseline: { label: 'untraced', value: offm.result.rps, unit: 'req/s' },
      ratio,
      details: {
        traced: summary(onm),
        untraced: summary(offm),
        cpu_ms_per_request_added: Number((onm.cpuMsPerRequest - offm.cpuMsPerRequest).toFixed(3)),
        otlp_posts: sink.posts(),
        otlp_bytes: sink.bytes(),
      },
    },
  ];
}
