/**
 * A small invoice provider on loopback, for trying the SDK against real HTTP failures. It honours
 * idempotency keys the way payment APIs do (one invoice per key; the same key again answers the
 * original invoice), offers the lookup by key that verification needs, and can be told to fail a
 * request in the ways the contract table is about.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Invoice {
  id: string;
  /** The idempotency key the invoice was created with: the runtime's operation_ref. */
  operation_ref: string;
  customer_id: string;
  amount_cents: number;
  currency: string;
  created_at: string;
}

export type FaultKind =
  /** Create the invoice, then never answer (the caller times out). */
  | 'accept-then-timeout'
  /** Create the invoice, then destroy the socket (the caller sees a reset). */
  | 'accept-then-destroy'
  /** 429 with Retry-After; nothing created (on a lookup: nothing read). */
  | 'rate-limit'
  /** 400 naming a field; nothing created. */
  | 'bad-request'
  /** 403; nothing created. */
  | 'forbidden'
  /** 502 from "a proxy"; nothing created unless `commit` (the upstream kept working). */
  | 'bad-gateway'
  /** Answer normally after `delay_ms`. */
  | 'slow'
  /** For the lookup: 503, so verification cannot tell. */
  | 'lookup-unavailable';

export interface Fault {
  kind: FaultKind;
  /** For rate-limit: the Retry-After in seconds (default 2). */
  retry_after_s?: number;
  /** For slow: the delay (default 1500 ms). */
  delay_ms?: number;
  /** For bad-gateway: create the invoice before answering 502. */
  commit?: boolean;
  /** For bad-request: the field named as invalid (default customer_id). */
  field?: string;
  /** A message for the error body: upstream text, which the SDK must never pass on to a model. */
  message?: string;
}

export interface FaultRule {
  fault: Fault;
  /** Only requests with this idempotency key (or lookups of it); any request when absent. */
  operation_ref?: string;
  /** How many matching requests it applies to (default 1). */
  times?: number;
  /** `create` (POST /invoices, the default) or `lookup` (GET /invoices?operation_ref=). */
  on?: 'create' | 'lookup';
}

export interface InvoiceProvider {
  url: string;
  server: Server;
  invoices(): Invoice[];
  /** Invoices actually created per operation_ref, counted at the commit (with idempotency off, every create counts). */
  createdCounts(): Map<string, number>;
  /** How many create requests arrived, per idempotency key (whatever became of them). */
  createRequests(): Map<string, number>;
  inject(rule: FaultRule): void;
  close(): Promise<void>;
}

export interface InvoiceProviderOptions {
  port?: number;
  /**
   * Off: every create that gets through makes a new invoice, even with a key already used, so a
   * duplicate write shows in createdCounts() instead of being absorbed (default on).
   */
  idempotency?: boolean;
  /** Random faults on creates, as fractions of requests, drawn from a seeded generator. */
  flaky?: { timeoutAfterCommit?: number; rateLimit?: number; seed?: number; retryAfterSeconds?: number };
  /** Loopback only: this is a test double, never a public service. */
  host?: '127.0.0.1' | '::1' | 'localhost';
  /** How long an idle kept-alive connection stays open (Node's default, 5 s, when not given). */
  keepAliveMs?: number;
}

const FAULT_KINDS: readonly FaultKind[] = [
  'accept-then-timeout',
  'accept-then-destroy',
  'rate-limit',
  'bad-request',
  'forbidden',
  'bad-gateway',
  'slow',
  'lookup-unavailable',
];
const CUSTOMER_PATTERN = /^cus_[A-Za-z0-9]{1,32}$/;
const CURRENCY_PATTERN = /^[A-Z]{3}$/;
const MAX_BODY_BYTES = 64 * 1024;

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      text += chunk;
      if (text.length > MAX_BODY_BYTES) request.destroy(new Error('body too large'));
    });
    request.on('end', () => resolve(text));
    request.on('error', reject);
  });
}

/** The field that is wrong, or undefined when the input is a valid invoice. */
function invalidField(input: Record<string, unknown>): string | undefined {
  if (typeof input.customer_id !== 'string' || !CUSTOMER_PATTERN.test(input.customer_id)) return 'customer_id';
  if (!Number.isSafeInteger(input.amount_cents) || (input.amount_cents as number) <= 0) return 'amount_cents';
  if (typeof input.currency !== 'string' || !CURRENCY_PATTERN.test(input.currency)) return 'currency';
  return undefined;
}

/** mulberry32: small and seedable, so a flaky run can be replayed. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function parseFault(value: unknown): Fault | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const fault = value as Fault;
  return FAULT_KINDS.includes(fault.kind) ? fault : undefined;
}

export async function startInvoiceProvider(options: InvoiceProviderOptions = {}): Promise<InvoiceProvider> {
  const byKey = new Map<string, Invoice>();
  const requestCounts = new Map<string, number>();
  /** The W3C traceparent each create request carried, per idempotency key (the caller's trace). */
  const traceparents = new Map<string, string[]>();
  const createdCounts = new Map<string, number>();
  const idempotent = options.idempotency !== false;
  const random = seeded(options.flaky?.seed ?? 1);
  const rules: FaultRule[] = [];
  const sockets = new Set<Socket>();

  /** The first rule that matches, consumed once. A per-request `x-fault` header comes first. */
  function takeFault(request: IncomingMessage, on: 'create' | 'lookup', key: string | undefined): Fault | undefined {
    const header = request.headers['x-fault'];
    if (typeof header === 'string') {
      const fault = parseFault({
        kind: header,
        retry_after_s: Number(request.headers['x-fault-retry-after'] ?? 2),
        delay_ms: Number(request.headers['x-fault-delay-ms'] ?? 1500),
        commit: request.headers['x-fault-commit'] === 'true',
      });
      if (fault) return fault;
    }
    const index = rules.findIndex(
      (rule) => (rule.on ?? 'create') === on && (!rule.operation_ref || rule.operation_ref === key),
    );
    if (index < 0) return on === 'create' ? randomFault() : undefined;
    const rule = rules[index];
    rule.times = (rule.times ?? 1) - 1;
    if (rule.times <= 0) rules.splice(index, 1);
    return rule.fault;
  }

  function randomFault(): Fault | undefined {
    const flaky = options.flaky;
    if (!flaky) return undefined;
    const draw = random();
    const timeout = flaky.timeoutAfterCommit ?? 0;
    if (draw < timeout) return { kind: 'accept-then-timeout' };
    if (draw < timeout + (flaky.rateLimit ?? 0))
      return { kind: 'rate-limit', retry_after_s: flaky.retryAfterSeconds ?? 1 };
    return undefined;
  }

  /** One invoice per key: checked and stored in one synchronous step, so concurrent requests cannot both create. */
  function commit(key: string, input: Record<string, unknown>): { invoice: Invoice; replayed: boolean } {
    const existing = byKey.get(key);
    if (existing && idempotent) return { invoice: existing, replayed: true };
    createdCounts.set(key, (createdCounts.get(key) ?? 0) + 1);
    const invoice: Invoice = {
      id: `inv_${randomUUID().replace(/-/g, '').slice(0, 16)}`,
      operation_ref: key,
      customer_id: input.customer_id as string,
      amount_cents: input.amount_cents as number,
      currency: input.currency as string,
      created_at: new Date().toISOString(),
    };
    if (!existing) byKey.set(key, invoice);
    return { invoice, replayed: false };
  }

  async function create(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || key.length === 0 || key.length > 200) {
      return send(response, 400, { error: { code: 'idempotency_key_required', field: 'Idempotency-Key' } });
    }
    requestCounts.set(key, (requestCounts.get(key) ?? 0) + 1);
    const traceparent = request.headers.traceparent;
    if (typeof traceparent === 'string') traceparents.set(key, [...(traceparents.get(key) ?? []), traceparent]);
    let input: Record<string, unknown>;
    try {
      input = JSON.parse(await readBody(request)) as Record<string, unknown>;
    } catch {
      return send(response, 400, { error: { code: 'invalid_json', message: 'the body is not JSON' } });
    }
    const fault = takeFault(request, 'create', key);
    switch (fault?.kind) {
      case 'rate-limit':
        return send(
          response,
          429,
          { error: { code: 'rate_limited', message: fault.message ?? 'Too many requests' } },
          { 'retry-after': String(fault.retry_after_s ?? 2) },
        );
      case 'bad-request':
        return send(response, 400, {
          error: { code: 'invalid_request', field: fault.field ?? 'customer_id', message: fault.message ?? 'invalid' },
        });
      case 'forbidden':
        return send(response, 403, {
          error: { code: 'not_permitted', message: fault.message ?? 'this key may not create invoices' },
        });
      case 'bad-gateway':
        if (fault.commit && !invalidField(input)) commit(key, input);
        response.writeHead(502, { 'content-type': 'text/html' });
        return void response.end(
          `<html><body>502 Bad Gateway${fault.message ? ` ${fault.message}` : ''}</body></html>`,
        );
      case 'slow':
        await new Promise((resolve) => setTimeout(resolve, fault.delay_ms ?? 1500));
        break;
      default:
        break;
    }
    const field = invalidField(input);
    if (field)
      return send(response, 422, { error: { code: 'invalid_request', field, message: `${field} is invalid` } });
    const existing = idempotent ? byKey.get(key) : undefined;
    if (
      existing &&
      (existing.customer_id !== input.customer_id ||
        existing.amount_cents !== input.amount_cents ||
        existing.currency !== input.currency)
    ) {
      // The key was used for another invoice: refuse rather than answer an invoice the caller did not ask for.
      return send(response, 409, {
        error: { code: 'idempotency_key_reused', message: 'this key was used with other parameters' },
      });
    }
    const { invoice, replayed } = commit(key, input);
    if (fault?.kind === 'accept-then-timeout') return; // committed; the answer never comes
    if (fault?.kind === 'accept-then-destroy') return void request.socket.destroy();
    send(response, replayed ? 200 : 201, invoice, replayed ? { 'idempotent-replayed': 'true' } : {});
  }

  function list(request: IncomingMessage, response: ServerResponse, url: URL): void {
    const key = url.searchParams.get('operation_ref');
    const fault = key === null ? undefined : takeFault(request, 'lookup', key);
    if (fault?.kind === 'lookup-unavailable') return send(response, 503, { error: { code: 'unavailable' } });
    if (fault?.kind === 'rate-limit') {
      return send(
        response,
        429,
        { error: { code: 'rate_limited' } },
        { 'retry-after': String(fault.retry_after_s ?? 2) },
      );
    }
    const items = key === null ? [...byKey.values()] : byKey.has(key) ? [byKey.get(key)] : [];
    send(response, 200, { items });
  }

  async function control(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let rule: FaultRule;
    try {
      rule = JSON.parse(await readBody(request)) as FaultRule;
    } catch {
      return send(response, 400, { error: { code: 'invalid_json' } });
    }
    const fault = parseFault(rule?.fault);
    if (!fault) return send(response, 400, { error: { code: 'unknown_fault', allowed: FAULT_KINDS } });
    rules.push({ ...rule, fault });
    send(response, 200, { queued: rules.length });
  }

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://provider');
    const route = `${request.method} ${url.pathname}`;
    const handle = async () => {
      if (route === 'POST /invoices') return create(request, response);
      if (route === 'GET /invoices') return list(request, response, url);
      if (route.startsWith('GET /invoices/')) {
        const invoice = [...byKey.values()].find((item) => item.id === url.pathname.slice('/invoices/'.length));
        return invoice ? send(response, 200, invoice) : send(response, 404, { error: { code: 'not_found' } });
      }
      if (route === 'POST /__faults') return control(request, response);
      if (route === 'GET /__health') return send(response, 200, { ok: true, invoices: byKey.size });
      // What createRequests() tells an in-process test, for a test in another process (or language).
      if (route === 'GET /__requests') {
        return send(response, 200, {
          create_requests: Object.fromEntries(requestCounts),
          traceparents: Object.fromEntries(traceparents),
        });
      }
      if (route === 'GET /__stats') {
        return send(response, 200, {
          created: Object.fromEntries(createdCounts),
          create_requests: Object.fromEntries(requestCounts),
        });
      }
      send(response, 404, { error: { code: 'not_found' } });
    };
    handle().catch(() => {
      if (!response.headersSent) send(response, 500, { error: { code: 'internal' } });
    });
  });
  if (options.keepAliveMs !== undefined) server.keepAliveTimeout = options.keepAliveMs;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host === '::1' ? '[::1]' : host}:${port}`,
    server,
    invoices: () => [...byKey.values()],
    createdCounts: () => new Map(createdCounts),
    createRequests: () => new Map(requestCounts),
    inject: (rule) => {
      const fault = parseFault(rule.fault);
      if (!fault) throw new Error(`unknown fault ${JSON.stringify(rule.fault)}`);
      rules.push({ ...rule, fault });
    },
    close: async () => {
      // Held answers (accept-then-timeout) would keep the server open forever.
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
