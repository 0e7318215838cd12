import { ArgumentsHost, Catch, HttpException, Logger, type ExceptionFilter } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_REGISTRY, type ErrorCode, LedgerProblem } from '@recovery-ledger/core';
import { StoreIntegrityError, StoreUnavailableError } from '../store/event-store.port';
import { OPERATION_REF_RULE } from './operation-ref';
import { PROBLEM_CONTENT_TYPE, problemBody, retryAfterOf } from './problem-body';

export { PROBLEM_CONTENT_TYPE, problemBody };

/** Fastify's own error codes (body parsing, limits) as the registry's codes. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'BAD_REQUEST',
  FST_ERR_CTP_INVALID_JSON_BODY: 'BAD_REQUEST',
  FST_ERR_BAD_URL: 'BAD_REQUEST',
  FST_ERR_MAX_PARAM_LENGTH: 'BAD_REQUEST',
};

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
  503: 'STORE_UNAVAILABLE',
};

/** Everything a thrown value may be, as a registered problem. Internals never reach the body. */
export function toLedgerProblem(error: unknown): LedgerProblem {
  if (error instanceof LedgerProblem) return error;
  if (error instanceof StoreUnavailableError) {
    // Not "nothing was stored": an append whose answer was lost (a dropped connection, a deadline)
    // may stand in the log whole. Never half: resubmitting the same events tells which.
    return new LedgerProblem(
      'STORE_UNAVAILABLE',
      'the event store is unavailable; a submitted write is whole or absent: resubmit the same events (same event_ids) to learn which',
      {
        retryAfterSeconds: error.retryAfterSeconds,
      },
    );
  }
  if (error instanceof StoreIntegrityError) {
    // The stream (or log) is not the history the ledger wrote; the detail names no internals
    // beyond the fault itself, and `recovery-ledger verify` reports it whole (docs/reliability.md).
    return new LedgerProblem(
      'HISTORY_INTEGRITY_FAILED',
      `the stored history of this operation failed verification: ${error.reason}. Nothing was stored; an operator must restore the log (recovery-ledger verify names every fault)`,
    );
  }
  // Nest's Fastify adapter wraps Fastify's own errors in an HttpException: the code is on the cause.
  const fastifyCode = (error as { code?: unknown })?.code ?? (error as { cause?: { code?: unknown } })?.cause?.code;
  if (typeof fastifyCode === 'string' && FASTIFY_CODES[fastifyCode]) {
    const code = FASTIFY_CODES[fastifyCode];
    if (code === 'PAYLOAD_TOO_LARGE')
      return new LedgerProblem(code, 'the request body is over the limit', { field: 'body' });
    if (code === 'UNSUPPORTED_MEDIA_TYPE')
      return new LedgerProblem(code, 'send the body as application/json', { field: 'content-type' });
    if (fastifyCode === 'FST_ERR_BAD_URL')
      return new LedgerProblem(code, 'the path is not valid percent-encoding', { field: 'path' });
    if (fastifyCode === 'FST_ERR_MAX_PARAM_LENGTH') {
      return new LedgerProblem(code, OPERATION_REF_RULE, { field: 'operation_ref' });
    }
    return new LedgerProblem(code, 'the request body is not valid JSON', { field: 'body' });
  }
  if (error instanceof SyntaxError || (error as { statusCode?: number })?.statusCode === 400) {
    return new LedgerProblem('BAD_REQUEST', 'the request body is not valid JSON', { field: 'body' });
  }
  if (error instanceof HttpException) {
    const status = error.getStatus();
    const code = STATUS_CODES[status];
    if (code === 'RATE_LIMITED')
      return new LedgerProblem(code, 'too many requests for this key', { retryAfterSeconds: 60 });
    if (code === 'NOT_FOUND') return new LedgerProblem(code, 'no such route');
    // A 400 that is not ours comes from parsing the body (forbidden prototype keys, broken JSON).
    if (code === 'BAD_REQUEST')
      return new LedgerProblem(code, 'the request body is not acceptable JSON', { field: 'body' });
    if (code) return new LedgerProblem(code, ERROR_REGISTRY[code].title);
  }
  const status = (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && STATUS_CODES[status]) {
    const code = STATUS_CODES[status];
    return new LedgerProblem(code, ERROR_REGISTRY[code].title);
  }
  return new LedgerProblem('INTERNAL_ERROR', 'an unexpected error; nothing was stored');
}

export function sendProblem(reply: FastifyReply, error: LedgerProblem, instance?: string): void {
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
  reply
    .status(error.status)
    .header('content-type', PROBLEM_CONTENT_TYPE)
    .send(JSON.stringify(problemBody(error, instance)));
}

/** The single place errors become responses (RFC 9457 problem details with the stable code). */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly logger = new Logger('ProblemFilter');

  catch(exception: unknown, host: ArgumentsHost): void {
    const context = host.switchToHttp();
    const reply = context.getResponse<FastifyReply>();
    const request = context.getRequest<FastifyRequest>();
    const error = toLedgerProblem(exception);
    if (error.code === 'INTERNAL_ERROR') {
      // The route's pattern, never the URL: it carries the operation_ref and the query string.
      this.logger.error({ err: exception, route: request?.routeOptions?.url ?? 'unmatched' }, 'unexpected error');
    } else if (error.code === 'HISTORY_INTEGRITY_FAILED') {
      this.logger.error(
        { integrity: (exception as StoreIntegrityError).reason },
        'refused: the stored history failed verification',
      );
    }
    sendProblem(reply, error, request?.url?.split('?')[0]);
  }
}
