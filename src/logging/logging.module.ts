import { Module, RequestMethod, type DynamicModule } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoggerModule } from 'nestjs-pino';
import pino from 'pino';
import type { Options } from 'pino-http';
import { loggedPath, loggedRoute } from './logged-path';
import { traceFieldsOf } from './request-context';

export { loggedPath };
import { ShutdownLog } from './shutdown-log';

const pathOf = (req: IncomingMessage) =>
  ((req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?')[0];

/** Probes and scrapes every few seconds would drown the requests people read logs for. */
const QUIET_PATHS = [/^\/health\//, /^\/metrics$/];

export function httpLogOptions(level: string): Options<IncomingMessage, ServerResponse> {
  return {
    level,
    base: { service: 'recovery-ledger' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    messageKey: 'msg',
    // Every line of a request carries its trace, so a log search by trace id finds the submit
    // whose traceparent the ledger recorded in the event metadata.
    customProps: (req) => traceFieldsOf(req.headers.traceparent) ?? {},
    // Headers are left out on purpose: Authorization carries the API key.
    serializers: {
      req: (req: { id: unknown; method: string; url: string; remoteAddress?: string; raw?: IncomingMessage }) => ({
        id: req.id,
        method: req.method,
        url: loggedRoute(req.raw, req.url),
        remote_address: req.remoteAddress,
      }),
      res: (res: { statusCode: number }) => ({ status_code: res.statusCode }),
    },
    // originalUrl: the middleware adapter may have cut the matched path off `url` by now.
    autoLogging: {
      ignore: (req) => QUIET_PATHS.some((pattern) => pattern.test(pathOf(req))),
    },
    customLogLevel: (_req, res, error) =>
      error || res.statusCode >= 500
        ? 'error'
        : res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 429
          ? 'warn'
          : 'info',
    customSuccessMessage: (req, res, responseTime) =>
      `${req.method} ${loggedRoute(req, pathOf(req))} ${res.statusCode} in ${Math.round(responseTime)} ms`,
    customErrorMessage: (req, res) => `${req.method} ${loggedRoute(req, pathOf(req))} ${res.statusCode} failed`,
  };
}

/**
 * Where the records go: a pipe or a file (a collector, `npm start | tee`, the tests) gets one JSON
 * line a record; a terminal gets the same records made readable by pino-pretty. Both write
 * synchronously: on SIGTERM the process ends right after shutdown, and a buffered line would be lost.
 */
export function logDestination(stdoutIsTerminal = process.stdout.isTTY === true): pino.DestinationStream {
  if (!stdoutIsTerminal) return pino.destination({ dest: 1, sync: true });
  // Loaded only for a terminal, so a service whose logs are collected never loads it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pretty = require('pino-pretty') as typeof import('pino-pretty');
  return pretty.build({
    destination: 1,
    sync: true,
    colorize: true,
    translateTime: 'SYS:HH:MM:ss.l',
    messageFormat: '{if context}[{context}] {end}{msg}',
    ignore: 'pid,hostname,service,context',
  });
}

/**
 * Logs through nestjs-pino, with the request id (Fastify's, made from X-Request-Id by
 * requestIdOptions and echoed on the response) and the W3C trace id on every line a request writes.
 */
@Module({})
export class LoggingModule {
  /** `destination`: stdout by default (logDestination); the int tier's in-process service passes its own. */
  static register(level: string, destination: pino.DestinationStream = logDestination()): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        LoggerModule.forRoot({
          pinoHttp: [httpLogOptions(level), destination],
          // Spelled out: the library's default pattern matches no request under the Fastify adapter
          // of NestJS 12, which left every request unlogged.
          forRoutes: [{ path: '/{*path}', method: RequestMethod.ALL }],
        }),
      ],
      providers: [ShutdownLog],
    };
  }
}
