import { Module, type DynamicModule } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoggerModule } from 'nestjs-pino';
import pino from 'pino';
import type { Options } from 'pino-http';
import { requestIdOf, traceFieldsOf } from './request-context';

/** Probes and scrapes every few seconds would drown the requests people read logs for. */
const QUIET_PATHS = [/^\/health\//, /^\/metrics(\?|$)/];

export function httpLogOptions(level: string): Options<IncomingMessage, ServerResponse> {
  return {
    level,
    base: { service: 'recovery-ledger' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    messageKey: 'msg',
    genReqId: (req, res) => {
      const id = requestIdOf(req.headers['x-request-id']);
      res.setHeader('x-request-id', id);
      return id;
    },
    // Every line of a request carries its trace, so a log search by trace id finds the submit
    // whose traceparent the ledger recorded in the event metadata.
    customProps: (req) => traceFieldsOf(req.headers.traceparent) ?? {},
    // Headers are left out on purpose: Authorization carries the API key.
    serializers: {
      req: (req: { id: unknown; method: string; url: string; remoteAddress?: string }) => ({
        id: req.id,
        method: req.method,
        url: req.url,
        remote_address: req.remoteAddress,
      }),
      res: (res: { statusCode: number }) => ({ status_code: res.statusCode }),
    },
    autoLogging: { ignore: (req) => QUIET_PATHS.some((pattern) => pattern.test(req.url ?? '')) },
    customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 429 ? 'warn' : 'info'),
    customSuccessMessage: (req, res, responseTime) => `${req.method} ${req.url} ${res.statusCode} in ${Math.round(responseTime)} ms`,
    customErrorMessage: (req, res) => `${req.method} ${req.url} ${res.statusCode} failed`,
  };
}

/**
 * JSON logs (nestjs-pino), one line a record on stdout, with the request id (X-Request-Id, echoed
 * on the response) and the W3C trace id on every line a request writes. Written synchronously:
 * on SIGTERM the process ends right after shutdown, and a buffered line would be lost.
 */
@Module({})
export class LoggingModule {
  static register(level: string): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        LoggerModule.forRoot({
          pinoHttp: [httpLogOptions(level), pino.destination({ dest: 1, sync: true })],
        }),
      ],
    };
  }
}
