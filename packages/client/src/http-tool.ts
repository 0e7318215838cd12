import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { ToolEnvelope } from '@recovery-ledger/core/envelope';
import { boundCallWindow, CALL_DEADLINE_HEADER, type CallWindow } from './call-window';
import { callWindowPassed, type NormalizeContext } from './normalizers/envelope-builders';
import { normalizeHttpResponse, type HttpNormalizeOptions } from './normalizers/http-response.normalizer';
import { inputFieldsOf } from './normalizers/input-fields';
import { normalizeNetworkError } from './normalizers/network-error.normalizer';
import { traceHeaders } from './telemetry';

export interface HttpToolRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  body?: unknown;
  /** For the whole exchange, the body of the answer included (default 10 s). */
  timeoutMs?: number;
  /** The header that carries the idempotency key (default `Idempotency-Key`); null to send none. */
  idempotencyHeader?: string | null;
  /** The caller's signal (ToolCallContext.signal); it stops the request as the timeout does. */
  signal?: AbortSignal;
  /**
   * The attempt's call window (ToolCallContext.callWindow; found from ToolCallContext.signal when
   * not given): checked again right before the request's bytes go to the socket, and its deadline
   * sent as the Ledger-Call-Deadline header.
   */
  callWindow?: CallWindow;
}

export type HttpToolOptions = Omit<HttpNormalizeOptions, 'now'> & {
  now?: () => Date;
  fetch?: typeof fetch;
};

/**
 * One HTTP call to a provider, answered as an envelope: the operation_ref goes out as the
 * idempotency key, a thrown fetch goes through the network-error normalizer and an answer through
 * the HTTP one. Reading the body is part of the call: a connection that breaks after the status
 * line is a failure after send, unknown for a write.
 *
 * A write (`sideEffect: 'write'`, no `fetch` of the caller's) goes out on a connection of its own,
 * opened for it and closed after, and the call window is checked in the same synchronous step that
 * hands the request to the socket: no pooled connection writes a request the window no longer
 * allows (docs/reliability.md "How close the check sits to the write").
 */
export async function callHttpTool(request: HttpToolRequest, options: HttpToolOptions): Promise<ToolEnvelope> {
  const now = options.now ?? (() => new Date());
  const headerName = request.idempotencyHeader === undefined ? 'Idempotency-Key' : request.idempotencyHeader;
  const window = request.callWindow ?? boundCallWindow(request.signal);
  const headers: Record<string, string> = {
    accept: 'application/json',
    ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
    ...(headerName ? { [headerName]: options.operationRef } : {}),
    // A provider that can enforce the deadline refuses a call that arrives after it.
    ...(window?.deadline === undefined ? {} : { [CALL_DEADLINE_HEADER]: window.deadline }),
    // The tool call's trace goes on to the provider (W3C Trace Context), when OpenTelemetry is installed.
    ...traceHeaders(),
    ...request.headers,
  };
  // A provider may name an invalid field only if the request carried it.
  const inputFields = options.inputFields ?? inputFieldsOf(request.body);
  const context = (): NormalizeContext & HttpNormalizeOptions => ({ ...options, inputFields, now: now() });
  // Aborted before anything was handed to the network: the request provably never left.
  if (request.signal?.aborted)
    return normalizeNetworkError(request.signal.reason, { ...context(), phase: 'before_send' });
  if (window && !window.open()) return callWindowPassed(context());
  const timeout = AbortSignal.timeout(request.timeoutMs ?? 10_000);
  const signal = request.signal ? AbortSignal.any([timeout, request.signal]) : timeout;
  const init: WriteInit = {
    method: request.method ?? (request.body === undefined ? 'GET' : 'POST'),
    headers,
    ...(request.body === undefined ? {} : { body: JSON.stringify(request.body) }),
  };
  let answer: Answer;
  if (options.sideEffect === 'write' && options.fetch === undefined) {
    const sent = await writeOnce(new URL(request.url), init, signal, window);
    if (sent.kind === 'window_passed') return callWindowPassed(context());
    if (sent.kind === 'failed') {
      if (!sent.written && window && !window.open()) return callWindowPassed(context());
      return normalizeNetworkError(sent.error, {
        ...context(),
        ...(sent.written ? { phase: 'after_send' } : { phase: 'before_send' }),
      });
    }
    answer = sent;
  } else {
    try {
      answer = await viaFetch(options.fetch ?? globalThis.fetch, request.url, init, signal);
    } catch (error) {
      return normalizeNetworkError(error, context());
    }
  }
  const { status, headers: responseHeaders, text } = answer;
  let body: unknown = text === '' ? undefined : text;
  try {
    if (text !== '') body = JSON.parse(text);
  } catch {
    // Not JSON: the text stays as the body; the normalizer never copies it into a message.
  }
  return normalizeHttpResponse({ status, headers: responseHeaders, body }, context());
}

interface WriteInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
}

interface Answer {
  status: number;
  headers: Headers | IncomingHttpHeaders;
  text: string;
}

async function viaFetch(fetchImpl: typeof fetch, url: string, init: WriteInit, signal: AbortSignal): Promise<Answer> {
  const response = await fetchImpl(url, { ...init, signal });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

type WriteResult =
  | ({ kind: 'answered' } & Answer)
  | { kind: 'window_passed' }
  /** `written`: whether the request had been handed to the socket when it failed. */
  | { kind: 'failed'; error: unknown; written: boolean };

/**
 * One request on a connection opened for it (no agent, `connection: close`). Nothing is written
 * before the connection (and its TLS handshake) is up; then the window is checked and the whole
 * request handed to the socket in the same synchronous step, which Node writes at once to a
 * connected socket. What remains between the check and the write is a few function calls.
 */
function writeOnce(
  url: URL,
  init: WriteInit,
  signal: AbortSignal,
  window: CallWindow | undefined,
): Promise<WriteResult> {
  return new Promise((resolve) => {
    const send = url.protocol === 'https:' ? httpsRequest : url.protocol === 'http:' ? httpRequest : undefined;
    if (send === undefined) {
      resolve({ kind: 'failed', error: new TypeError(`unsupported protocol ${url.protocol}`), written: false });
      return;
    }
    const payload = init.body === undefined ? undefined : Buffer.from(init.body, 'utf8');
    const headers = {
      ...init.headers,
      connection: 'close',
      ...(payload === undefined ? {} : { 'content-length': String(payload.length) }),
    };
    let written = false;
    let settled = false;
    const settle = (result: WriteResult): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const outgoing = send(url, { method: init.method, headers, agent: false });
    const fail = (error: unknown): void => settle({ kind: 'failed', error, written });
    const onAbort = (): void => {
      fail(signal.reason);
      outgoing.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    outgoing.on('error', fail);
    outgoing.on('socket', (socket: Socket) => {
      const ready = (): void => {
        if (settled) return;
        // The last check, and the write, in one synchronous step: no timer or I/O runs between them.
        if (window && !window.open()) {
          settle({ kind: 'window_passed' });
          outgoing.destroy();
          return;
        }
        written = true;
        outgoing.end(payload);
      };
      // A fresh socket: over TLS the request may go only once the handshake is done.
      if (socket instanceof TLSSocket) socket.once('secureConnect', ready);
      else if (socket.connecting) socket.once('connect', ready);
      else ready();
    });
    outgoing.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', fail);
      response.on('close', () => {
        if (!response.complete) {
          fail(Object.assign(new Error('the connection closed before the whole answer came'), { code: 'ECONNRESET' }));
          return;
        }
        settle({
          kind: 'answered',
          status: response.statusCode ?? 0,
          headers: response.headers,
          text: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
  });
}
