import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { ThrottlerStorage } from '@nestjs/throttler';
import { findKey, type ApiKeyEntry } from '../../auth/api-keys';
import { bearerToken } from '../../auth/bearer';
import { LedgerProblem } from '@recovery-ledger/core';
import { sendProblem } from '../problem.filter';
import { isLoopbackHost } from './loopback-host';
import { RATE_LIMIT_WINDOW_MS } from './rate-limit.guard';

/** A request that announces a body (RFC 9112 §6.3: a length above zero, or a transfer coding). */
function announcesBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * What is refused at Fastify's onRequest stage, before routing, a guard or a byte of the body.
 *
 * In local mode (no keys), a request whose Host is not a loopback name or address: every route is
 * open there, so a page that rebound its own name to 127.0.0.1 could otherwise read the log and
 * record approvals (src/http/security/loopback-host.ts). With keys the key decides, whatever name
 * a proxy forwards (docs/security.md, "Local mode").
 *
 * With keys, a request that carries a body but no known key: otherwise anyone could hold sockets
 * and memory open by trickling a body the guard refuses only once it has all arrived. Every route
 * that takes a body needs a key (there is no public POST). The refusal counts against the caller's
 * address as the rate limit counts every anonymous request, and closes the connection, so the
 * unread body is not parsed as a next request. Requests without a body are left to the guard,
 * which knows each route's rule.
 */
export function installEarlyAuth(
  instance: FastifyInstance,
  keys: readonly ApiKeyEntry[],
  storage: ThrottlerStorage,
  perMinute: number,
): void {
  if (keys.length === 0) {
    instance.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (isLoopbackHost(request.raw.headers.host)) return;
      if (announcesBody(request.raw)) reply.header('connection', 'close');
      sendProblem(
        reply,
        new LedgerProblem(
          'MISDIRECTED_REQUEST',
          'without API keys this service answers only requests for a loopback name (localhost, 127.0.0.1, [::1])',
        ),
        request.url.split('?')[0],
      );
      return reply;
    });
    return;
  }
  instance.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (!announcesBody(request.raw)) return;
    const token = bearerToken(request.headers.authorization);
    if (token !== undefined && findKey(keys, token)) return;
    reply.header('connection', 'close');
    const hits = await storage.increment(
      `default:ip:${request.ip}`,
      RATE_LIMIT_WINDOW_MS,
      perMinute,
      RATE_LIMIT_WINDOW_MS,
      'default',
    );
    const error = hits.isBlocked
      ? new LedgerProblem('RATE_LIMITED', `more than ${perMinute} requests in a minute; try again later`, {
          retryAfterSeconds: Math.max(1, Math.ceil(hits.timeToBlockExpire)),
        })
      : new LedgerProblem(
          'UNAUTHENTICATED',
          token === undefined ? 'send Authorization: Bearer <key>' : 'the key is not known',
        );
    sendProblem(reply, error, request.url.split('?')[0]);
    return reply;
  });
}
