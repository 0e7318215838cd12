import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { containsSecret } from '@recovery-ledger/core';
import { holdsSecret } from '../ledger/secret-scanner';

/** An inbound X-Request-Id is kept when it is a plain token, so a proxy's id follows the request. */
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** W3C Trace Context §3.2: version-traceid-parentid-flags; an all-zero trace or parent id is invalid. */
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

const inboundRequestId = (header: string | string[] | undefined) => (Array.isArray(header) ? header[0] : header);

export function requestIdOf(header: string | string[] | undefined): string {
  const value = inboundRequestId(header);
  // Logged on every line and echoed: one that looks like a credential is replaced, not kept. The
  // shapes known here are checked now (Fastify asks synchronously); the rest of the one detector
  // runs in installRequestIdCheck, before anything logs or echoes the id.
  return value !== undefined && REQUEST_ID_PATTERN.test(value) && !containsSecret(value) ? value : randomUUID();
}

/**
 * The inbound X-Request-Id kept by requestIdOf is judged by the whole of the one secret detector
 * (secretlint's preset included, docs/security.md "Secrets") and replaced by a fresh UUID when it
 * flags anything. Installed on the Fastify instance before Nest registers its middleware, so it
 * runs before the request logger copies the id and before the echo sets the response header.
 */
export function installRequestIdCheck(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', async (request) => {
    const inbound = inboundRequestId(request.headers['x-request-id']);
    if (inbound !== undefined && request.id === inbound && (await holdsSecret(inbound))) request.id = randomUUID();
  });
}

export interface TraceFields {
  trace_id: string;
  span_id: string;
}

export function traceFieldsOf(header: string | string[] | undefined): TraceFields | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim().toLowerCase();
  const match = value === undefined ? null : TRACEPARENT_PATTERN.exec(value);
  if (!match || match[1] === 'ff' || /^0+$/.test(match[2]) || /^0+$/.test(match[3])) return undefined;
  return { trace_id: match[2], span_id: match[3] };
}

/**
 * Fastify owns the request id (the logger middleware takes the one Fastify put on the request), so
 * it is made here, at the adapter, from a well-formed inbound X-Request-Id or a fresh UUID.
 */
export const requestIdOptions = {
  requestIdHeader: false as const,
  genReqId: (req: { headers: IncomingHttpHeaders }) => requestIdOf(req.headers['x-request-id']),
};

/** Every answer names its request id, so a caller can quote it when asking what happened. */
export function installRequestIdEcho(app: NestFastifyApplication): void {
  app
    .getHttpAdapter()
    .getInstance()
    .addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      done();
    });
}
