import { Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';

/**
 * Says when a shutdown starts and when the HTTP server has closed. Between the two lines the
 * service answers new requests with 503 and finishes the ones in flight; the store then commits
 * what it accepted and closes. An operator who sees the first line without the second knows the
 * process was killed before it was done.
 */
@Injectable()
export class ShutdownLog implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('Shutdown');
  private startedAt = 0;

  beforeApplicationShutdown(signal?: string): void {
    this.startedAt = Date.now();
    this.logger.log({ signal }, 'shutting down: refusing new requests, finishing those in flight');
  }

  onApplicationShutdown(signal?: string): void {
    // The HTTP server closed before this hook: every request in flight has had its answer.
    this.logger.log({ signal, ms: Date.now() - this.startedAt }, 'HTTP server closed; closing the store');
  }
}
