import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { LedgerConfig } from '../../config/ledger-config';
import { installJsonBodyParser } from './json-body';
import { installSecurityHeaders } from './security-headers';
import { installJsonReplies } from '../json-reply';

/**
 * The HTTP hardening that lives at the Fastify adapter rather than in a guard: the JSON parser
 * with its shape limits and the response headers. Called by createApp before the routes are
 * registered, so both apply to every route, error and 404.
 */
export function installSecurity(app: NestFastifyApplication, config: LedgerConfig): void {
  installJsonBodyParser(app, config.bodyLimitBytes);
  installSecurityHeaders(app.getHttpAdapter().getInstance());
  installJsonReplies(app.getHttpAdapter().getInstance());
}
