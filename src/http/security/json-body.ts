import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import { LedgerProblem } from '@recovery-ledger/core';
import { DEFAULT_BODY_LIMITS, findUnsafeNumber, inspectBody, type BodyLimits } from './body-inspection';

type Done = (error: Error | null, body?: unknown) => void;

/**
 * The one JSON parser of the service: Fastify's own (secure-json-parse, which refuses `__proto__`
 * and `constructor.prototype` as the adapter is configured), then the shape limits of
 * body-inspection.ts. Refusals are thrown before routing reaches a guard, a pipe or a handler, so
 * no validator, redactor or decider ever walks a body that breaks them.
 */
export function installJsonBodyParser(
  app: NestFastifyApplication,
  bodyLimitBytes: number,
  limits: BodyLimits = DEFAULT_BODY_LIMITS,
): void {
  const instance = app.getHttpAdapter().getInstance();
  const { onProtoPoisoning, onConstructorPoisoning } = instance.initialConfig as {
    onProtoPoisoning?: 'error' | 'remove' | 'ignore';
    onConstructorPoisoning?: 'error' | 'remove' | 'ignore';
  };
  const parse = instance.getDefaultJsonParser(onProtoPoisoning ?? 'error', onConstructorPoisoning ?? 'error');
  // Registered through Nest (not on the Fastify instance directly), so Nest does not add its own
  // JSON parser beside it at init.
  // Only JSON is taken: Fastify's text/plain parser would hand a string to the handlers, which
  // then answered 400 where the contract promises 415 UNSUPPORTED_MEDIA_TYPE.
  instance.removeContentTypeParser('text/plain');
  // A form (urlencoded) is what a page on another site can post without asking: Nest would add a
  // parser for it, so its place is taken by a refusal, 415 like every type but JSON.
  app.useBodyParser(
    'application/x-www-form-urlencoded',
    { bodyLimit: bodyLimitBytes },
    (_request: FastifyRequest, _body: Buffer, done: Done) =>
      done(new LedgerProblem('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json', { field: 'content-type' })),
  );
  app.useBodyParser(
    'application/json',
    { bodyLimit: bodyLimitBytes },
    (request: FastifyRequest, body: Buffer, done: Done) => {
      const text = body.toString('utf8');
      // Fastify's default JSON parser answers through the callback; its type also allows a promise.
      void parse(request, text, (error: Error | null, value?: unknown) => {
        if (error) return done(error);
        const violation = inspectBody(value, limits) ?? findUnsafeNumber(text);
        if (violation)
          return done(
            new LedgerProblem('BAD_REQUEST', `${violation.field} ${violation.reason}`, { field: violation.field }),
          );
        done(null, value);
      });
    },
  );
}
