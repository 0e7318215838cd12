/**
 * An OTLP/HTTP trace receiver on loopback, for tests: it takes what the service's exporter posts
 * to /v1/traces as JSON (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json) and keeps the spans, flat,
 * with ids as hex and attributes as plain values.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  service: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Record<string, unknown>;
  status: { code?: number };
  /** W3C tracestate the span was exported with ('' for none). */
  traceState: string;
}

export interface OtlpReceiver {
  /** The value for OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. */
  endpoint: string;
  spans: ReceivedSpan[];
  posts: number;
  /** Every body posted, as received: a value must be absent from all of it, not only from the fields read. */
  bodies: string[];
  close(): Promise<void>;
}

/** OTLP/JSON ids are hex; a base64 id (the protobuf JSON mapping) is turned into hex too. */
function hexId(value: unknown): string {
  if (typeof value !== 'string' || value === '') return '';
  return /^[0-9a-f]+$/.test(value) && (value.length === 32 || value.length === 16)
    ? value
    : Buffer.from(value, 'base64').toString('hex');
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};

function plain(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(plain);
  return undefined;
}

const attributesOf = (list: { key: string; value: AnyValue }[] | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: OtlpReceiver = {
    endpoint: '',
    spans: [],
    posts: 0,
    bodies: [],
    close: async () => undefined,
  };
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') return void response.writeHead(404).end();
      received.posts += 1;
      received.bodies.push(body);
      try {
        const payload = JSON.parse(body) as { resourceSpans?: any[] };
        for (const resourceSpans of payload.resourceSpans ?? []) {
          const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
          for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
            for (const span of scopeSpans.spans ?? []) {
              received.spans.push({
                service,
                name: span.name,
                kind: span.kind,
                traceId: hexId(span.traceId),
                spanId: hexId(span.spanId),
                parentSpanId: hexId(span.parentSpanId),
                attributes: attributesOf(span.attributes),
                status: span.status ?? {},
                traceState: typeof span.traceState === 'string' ? span.traceState : '',
              });
            }
          }
        }
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        response.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  received.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  received.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return received;
}
