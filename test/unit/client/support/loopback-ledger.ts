/**
 * The ledger's HTTP contract (docs/contract.md §9) on a loopback socket, for the client's unit tests: every
 * decision is made by the real LedgerService (the real decider, over a real in-memory SQLite
 * store) and every error is rendered by the real problem+json functions. What it adds is what a
 * test needs and a server must not have: a clock the test moves, and faults on demand (an answer
 * lost after the fact was stored, a 503 with Retry-After) to prove the client's retries.
 *
 * GET /v1/recovery is computed here by folding each stream, the same fold the decider uses, since
 * the unit tests must not wait for the projection engine.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  DEFAULT_ENVELOPE_LIMITS,
  DEFAULT_POLICY,
  ERROR_REGISTRY,
  fold,
  isPlanned,
  LedgerProblem,
} from '@recovery-ledger/core';
import { LedgerService } from '../../../../src/ledger/ledger.service';
import { toRecorded } from '../../../../src/ledger/stored-events';
import { SqliteEventStore } from '../../../../src/adapters/sqlite/sqlite-event-store.adapter';
import { parseOperationStream } from '../../../../src/store/stream-names';
import { StoreUnavailableError, type StoredEvent } from '../../../../src/store/event-store.port';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: any;
}

/** A fault for the next matching request. */
export type Fault =
  /** Decide and store as usual, then destroy the socket: the client never sees the answer. */
  | { kind: 'drop_after_processing' }
  /** Answer 503 STORE_UNAVAILABLE with this Retry-After, without deciding anything. */
  | { kind: 'unavailable'; retryAfterSeconds?: number }
  /** Hold the request, unanswered, for this long (for client timeouts). */
  | { kind: 'stall'; ms: number };

export interface LoopbackLedger {
  baseUrl: string;
  requests: RecordedRequest[];
  /** Moves the ledger's clock forward. */
  advance(ms: number): void;
  now(): Date;
  /** Queues faults for the next requests (in order). */
  inject(...faults: Fault[]): void;
  events(operationRef: string): Promise<StoredEvent[]>;
  close(): Promise<void>;
}

const TENANT = 'default';
const RECOVERY_PAGE_SIZE = 2;

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (text += chunk));
    request.on('end', () => resolve(text));
    request.on('error', reject);
  });
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

/** docs/contract.md §9's problem+json. (The server's own filter is a NestJS module, which jest cannot load here.) */
function problemBody(error: LedgerProblem, instance: string): Record<string, unknown> {
  const { field, directive, state, retryAfterSeconds, results } = error.extras;
  return {
    type: `urn:recovery-ledger:problem:${error.code.toLowerCase().replace(/_/g, '-')}`,
    title: ERROR_REGISTRY[error.code].title,
    status: error.status,
    code: error.code,
    detail: error.detail,
    instance,
    ...(field ? { field } : {}),
    ...(directive ? { directive } : {}),
    ...(state ? { state } : {}),
    ...(results ? { results } : {}),
    ...(retryAfterSeconds !== undefined ? { retry_after_seconds: retryAfterSeconds } : {}),
  };
}

function toLedgerProblem(error: unknown): LedgerProblem {
  if (error instanceof LedgerProblem) return error;
  if (error instanceof StoreUnavailableError) {
    return new LedgerProblem('STORE_UNAVAILABLE', 'the event store is unavailable', {
      retryAfterSeconds: error.retryAfterSeconds,
    });
  }
  return new LedgerProblem('INTERNAL_ERROR', 'an unexpected error; nothing was stored');
}

function sendError(response: ServerResponse, error: unknown, path: string): void {
  const ledgerError = toLedgerProblem(error);
  const retryAfter = ledgerError.extras.retryAfterSeconds;
  response.writeHead(ledgerError.status, {
    'content-type': 'application/problem+json',
    ...(retryAfter === undefined ? {} : { 'retry-after': String(retryAfter) }),
  });
  response.end(JSON.stringify(problemBody(ledgerError, path.split('?')[0])));
}

export async function startLoopbackLedger(options: { start?: Date; apiKey?: string } = {}): Promise<LoopbackLedger> {
  let clock = (options.start ?? new Date('2030-01-01T00:00:00.000Z')).getTime();
  const store = SqliteEventStore.open({ file: ':memory:', groupCommit: false });
  const ledger = new LedgerService(
    store,
    { now: () => new Date(clock) },
    { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 },
  );
  const requests: RecordedRequest[] = [];
  const faults: Fault[] = [];

  async function recoveryItems() {
    const byStream = new Map<string, StoredEvent[]>();
    for (let after = 0; ;) {
      const batch = await store.readAll({ after, limit: 500, streamPrefix: 'op-' });
      if (batch.length === 0) break;
      for (const event of batch) byStream.set(event.stream, [...(byStream.get(event.stream) ?? []), event]);
      after = batch[batch.length - 1].position;
    }
    const items = [];
    for (const [stream, events] of byStream) {
      const parsed = parseOperationStream(stream);
      const state = fold(events.map(toRecorded));
      if (!parsed || !isPlanned(state) || (state.status !== 'dispatched' && state.status !== 'verifying')) continue;
      items.push({
        operation_ref: parsed.operationRef,
        tool: state.definition.tool,
        run_id: state.definition.run_id,
        status: state.status,
        since: state.since,
        attempt: state.current_attempt,
      });
    }
    return items.sort(
      (a, b) => Date.parse(a.since) - Date.parse(b.since) || a.operation_ref.localeCompare(b.operation_ref),
    );
  }

  async function route(request: IncomingMessage, response: ServerResponse, body: any): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://ledger');
    const path = url.pathname;
    if (options.apiKey && request.headers.authorization !== `Bearer ${options.apiKey}`) {
      throw new LedgerProblem('UNAUTHENTICATED', 'no or unknown API key');
    }
    const operation = /^\/v1\/operations\/([^/]+)(\/events)?$/.exec(path);
    if (operation && request.method === 'POST' && operation[2]) {
      const answer = await ledger.submit(
        {
          tenant: TENANT,
          actor: 'local',
          operationRef: decodeURIComponent(operation[1]),
          ...(typeof request.headers.traceparent === 'string' ? { traceparent: request.headers.traceparent } : {}),
        },
        body,
      );
      return send(response, 200, answer);
    }
    if (operation && request.method === 'GET') {
      const ref = decodeURIComponent(operation[1]);
      const { view } = await ledger.getState(TENANT, ref);
      if (!operation[2]) return send(response, 200, view);
      const { revision, events } = await ledger.events(TENANT, ref, { afterRevision: -1, limit: 1000 });
      return send(response, 200, {
        operation_ref: ref,
        revision,
        events: events.map((event) => ({
          revision: event.revision,
          position: event.position,
          event_id: event.event_id,
          type: event.type,
          recorded_at: event.metadata.recorded_at,
          actor: event.metadata.actor,
          schema_version: event.metadata.schema_version,
          data: event.data,
          prev_hash: event.metadata.prev_hash,
          hash: event.metadata.hash,
        })),
      });
    }
    if (path === '/v1/recovery' && request.method === 'GET') {
      const olderThan = Number(url.searchParams.get('older_than_ms') ?? 0);
      const all = (await recoveryItems()).filter((item) => clock - Date.parse(item.since) >= olderThan);
      const offset = Number(url.searchParams.get('cursor') ?? 0);
      const page = all.slice(offset, offset + RECOVERY_PAGE_SIZE);
      const next = offset + RECOVERY_PAGE_SIZE < all.length ? String(offset + RECOVERY_PAGE_SIZE) : undefined;
      return send(response, 200, { items: page, ...(next ? { next_cursor: next } : {}) });
    }
    throw new LedgerProblem('NOT_FOUND', 'no such route');
  }

  const server: Server = createServer(async (request, response) => {
    const text = await readBody(request);
    let body: any;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
    const fault = faults.shift();
    if (fault?.kind === 'unavailable') {
      return sendError(
        response,
        new LedgerProblem('STORE_UNAVAILABLE', 'the store is busy', { retryAfterSeconds: fault.retryAfterSeconds }),
        request.url ?? '',
      );
    }
    if (fault?.kind === 'stall') {
      await new Promise((resolve) => setTimeout(resolve, fault.ms));
    }
    try {
      if (fault?.kind === 'drop_after_processing') {
        // The fact is decided and stored; only the answer is lost on the way back.
        await route(
          request,
          { writeHead: () => undefined, end: () => undefined } as unknown as ServerResponse,
          body,
        ).catch(() => undefined);
        request.socket.destroy();
        return;
      }
      await route(request, response, body);
    } catch (error) {
      if (!response.headersSent && !response.destroyed) sendError(response, error, request.url ?? '');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    advance: (ms) => {
      clock += ms;
    },
    now: () => new Date(clock),
    inject: (...more) => faults.push(...more),
    events: (ref) => store.readStream(`op-${TENANT}:${ref}`),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await store.close();
    },
  };
}
