/**
 * The built service's logs: one JSON object a line, each request line with its request id (echoed
 * as X-Request-Id) and the W3C trace id of its traceparent, which a submit also records in the
 * event metadata; the API key never appears in them.
 */
import { randomUUID } from 'node:crypto';
import { fact, request } from '../support/http';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const KEY = 'ops-logs-runtime-key-0001';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
let ledger: LedgerProcess;

beforeAll(async () => {
  ledger = await startLedger({ env: { LEDGER_API_KEYS: `${KEY}:runtime:acme`, LOG_LEVEL: 'info' } });
});

afterAll(async () => {
  await ledger.stop();
  ledger.cleanup();
});

function jsonLines(): Array<Record<string, any>> {
  return ledger
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
}

async function logged(requestId: string): Promise<Record<string, any>> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const line = jsonLines().find((entry) => entry.req?.id === requestId && typeof entry.res?.status_code === 'number');
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`no log line for request ${requestId}:\n${ledger.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('structured logs', () => {
  it('a submit logs its request id and trace id, and the event keeps the traceparent', async () => {
    const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
    const requestId = `req-${randomUUID()}`;
    const answer = await request(
      ledger.baseUrl,
      'POST',
      `/v1/operations/${encodeURIComponent(ref)}/events`,
      {
        events: [
          fact('StepPlanned', { run_id: 'run_l', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
        ],
      },
      { authorization: `Bearer ${KEY}`, 'x-request-id': requestId, traceparent: TRACEPARENT },
    );
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-request-id')).toBe(requestId);

    const line = await logged(requestId);
    expect(line).toMatchObject({
      level: 'info',
      service: 'recovery-ledger',
      trace_id: TRACE_ID,
      span_id: '00f067aa0ba902b7',
      // The route's pattern, never the path: it carries the operation_ref (and a query, anything).
      req: { id: requestId, method: 'POST', url: '/v1/operations/:ref/events' },
      res: { status_code: 200 },
    });
    expect(Date.parse(line.time)).not.toBeNaN();

    // The ledger recorded the trace context on the fact and on what it caused.
    const events = await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(ref)}/events`, undefined, {
      authorization: `Bearer ${KEY}`,
    });
    expect(events.body.events.map((event: { traceparent?: string }) => event.traceparent)).toEqual([
      TRACEPARENT,
      TRACEPARENT,
    ]);
    // Every field the route answers is in the published document, the trace context included.
    const published = (await request(ledger.baseUrl, 'GET', '/docs/openapi.json')).body.components.schemas
      .StoredEventDto;
    for (const event of events.body.events as Array<Record<string, unknown>>)
      expect(Object.keys(event).filter((field) => !(field in published.properties))).toEqual([]);
  });

  it('every route of the OpenAPI document logs its pattern, never the path, and only a path no route matches logs <unmatched>', async () => {
    const document = await request(ledger.baseUrl, 'GET', '/docs/openapi.json');
    expect(document.status).toBe(200);
    const routes: Array<[string, string, string]> = [];
    for (const [template, methods] of Object.entries(document.body.paths as Record<string, object>)) {
      // /health/* and /metrics are polled by probes and scrapers and left out of the request log.
      if (/^\/(?:health\/|metrics$)/.test(template)) continue;
      const path = template
        .replace('{ref}', encodeURIComponent('run_x/step_1'))
        .replace(/\{[a-z_]+\}/g, '00000000-0000-4000-8000-000000000000');
      const pattern = template.replace(/\{([a-z_]+)\}/g, ':$1');
      for (const method of Object.keys(methods)) routes.push([method.toUpperCase(), path, pattern]);
    }
    // The console and the API reference are served beside the API, and a query never reaches the log.
    routes.push(
      ['GET', '/ui', '/ui'],
      ['GET', '/ui/app.js', '/ui/:file'],
      ['GET', '/docs', '/docs'],
      ['GET', '/v1/triage?kind=escalated&api_key=sk_live_abcdefghijklmnop', '/v1/triage'],
      ['GET', '/v1/no-such-route', '<unmatched>'],
      ['GET', '/favicon.ico', '<unmatched>'],
    );
    expect(routes.length).toBeGreaterThan(30);
    for (const [method, path, pattern] of routes) {
      const requestId = `req-${randomUUID()}`;
      // A runtime key and an empty body: refused where the route wants more, logged all the same.
      await request(ledger.baseUrl, method, path, method === 'POST' ? {} : undefined, {
        authorization: `Bearer ${KEY}`,
        'x-request-id': requestId,
      });
      const line = await logged(requestId);
      expect({ method, path, url: line.req.url, msg: line.msg.split(' ')[1] }).toEqual({
        method,
        path,
        url: pattern,
        msg: pattern,
      });
    }
  });

  it('a request without an id gets one, and a malformed id or traceparent is not taken', async () => {
    const fresh = await request(ledger.baseUrl, 'GET', '/v1/schema/envelope');
    expect(fresh.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    const hostile = await request(ledger.baseUrl, 'GET', '/v1/schema/envelope', undefined, {
      'x-request-id': 'line\tbreak"{}'.repeat(20),
      traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
    });
    const id = hostile.headers.get('x-request-id') as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const line = await logged(id);
    expect(line.trace_id).toBeUndefined();
  });

  it('an X-Request-Id holding a token is replaced: neither echoed nor logged as sent', async () => {
    // Tokens of the request-id grammar that only the maintained detector knows (secretlint's preset).
    const tokens = SECRET_CORPUS.filter(([what]) =>
      ['npm token', 'gitlab token', 'huggingface token', 'grafana service account token'].includes(what),
    ).map(([, text]) => text);
    const echoed: string[] = [];
    for (const token of tokens) {
      const answer = await request(ledger.baseUrl, 'GET', '/v1/schema/envelope', undefined, { 'x-request-id': token });
      const id = answer.headers.get('x-request-id') as string;
      echoed.push(id === token ? token : 'replaced');
      await logged(id);
    }
    expect(echoed).toEqual(tokens.map(() => 'replaced'));
    expect(tokens.filter((token) => ledger.output().includes(token))).toEqual([]);
  });

  it('every line is JSON, and no line carries the API key', async () => {
    await request(ledger.baseUrl, 'GET', '/v1/operations/x%2Fy', undefined, { authorization: `Bearer ${KEY}` });
    await request(ledger.baseUrl, 'GET', '/v1/operations/x%2Fy', undefined, {
      authorization: 'Bearer not-a-known-key-000000',
    });
    const unknownKeyLine = await (async () => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const line = jsonLines().find((entry) => entry.res?.status_code === 401);
        if (line) return line;
        if (Date.now() > deadline) throw new Error('no 401 line');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    expect(unknownKeyLine.level).toBe('warn');
    const output = ledger.output();
    expect(output).not.toContain(KEY);
    expect(output).not.toContain('not-a-known-key');
    // The local-mode banner is the one plain-text block, and this service has keys: so none.
    const lines = output
      .split('\n')
      .filter((line) => line.trim().length > 0 && !line.startsWith('recovery-ledger listening on'));
    const notJson = lines.filter((line) => {
      try {
        JSON.parse(line);
        return false;
      } catch {
        return true;
      }
    });
    // Node's own deprecation warnings go to stderr as text; they are not the service's log lines.
    expect(notJson.filter((line) => !/Warning|--trace-warnings/.test(line))).toEqual([]);
  });

  it('starts with no runtime warning (a deprecated option would print one at every start)', () => {
    // Node prints each process warning as "(node:<pid>) [CODE] ...Warning: ..." on stderr.
    expect(ledger.output()).not.toMatch(/\(node:\d+\)|Warning:|FSTDEP/);
  });
});
