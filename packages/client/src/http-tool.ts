import type { ToolEnvelope } from '@recovery-ledger/core/domain/envelope/envelope.types';
import type { NormalizeContext } from './normalizers/envelope-builders';
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
 */
export async function callHttpTool(request: HttpToolRequest, options: HttpToolOptions): Promise<ToolEnvelope> {
  const now = options.now ?? (() => new Date());
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const headerName = request.idempotencyHeader === undefined ? 'Idempotency-Key' : request.idempotencyHeader;
  const headers: Record<string, string> = {
    accept: 'application/json',
    ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
    ...(headerName ? { [headerName]: options.operationRef } : {}),
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
  const timeout = AbortSignal.timeout(request.timeoutMs ?? 10_000);
  let status: number;
  let responseHeaders: Headers;
  let text: string;
  try {
    const response = await fetchImpl(request.url, {
      method: request.method ?? (request.body === undefined ? 'GET' : 'POST'),
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: request.signal ? AbortSignal.any([timeout, request.signal]) : timeout,
    });
    status = response.status;
    responseHeaders = response.headers;
    text = await response.text();
  } catch (error) {
    return normalizeNetworkError(error, context());
  }
  let body: unknown = text === '' ? undefined : text;
  try {
    if (text !== '') body = JSON.parse(text);
  } catch {
    // Not JSON: the text stays as the body; the normalizer never copies it into a message.
  }
  return normalizeHttpResponse({ status, headers: responseHeaders, body }, context());
}
