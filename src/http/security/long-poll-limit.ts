import {
  applyDecorators,
  Inject,
  Injectable,
  SetMetadata,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { finalize, type Observable } from 'rxjs';
import type { Caller, RequestWithCaller } from '../../auth/caller';
import { CONFIG, type LedgerConfig } from '../../config/ledger-config';
import { LedgerProblem } from '@recovery-ledger/core';

interface OpenPoll {
  deadlineMs: number;
}

/**
 * How many long polls a key, and a tenant's keys together, may hold open at once
 * (docs/security.md, "Limits"). A waiting poll costs the service a socket and a wake-up per look;
 * hundreds from one runtime key cut another tenant's submits from ~700 in 4 s to a handful in 12 s.
 * The rate limit counts requests, not how long each is held, so it could not see this. Counts are
 * per process, in memory, like the rate limit's.
 */
export class LongPollLimiter {
  private readonly byKey = new Map<string, Set<OpenPoll>>();
  private readonly byTenant = new Map<string, Set<OpenPoll>>();

  constructor(
    readonly perKey: number,
    readonly perTenant: number,
  ) {}

  /** Admits one poll that waits until `deadlineMs`, and answers how to let it go; 429 past a cap. */
  enter(caller: Caller, nowMs: number, deadlineMs: number): () => void {
    const ofKey = this.byKey.get(caller.actor) ?? new Set<OpenPoll>();
    const ofTenant = this.byTenant.get(caller.tenant) ?? new Set<OpenPoll>();
    if (ofKey.size >= this.perKey) throw refusal(`this key holds ${this.perKey} long polls open already`, ofKey, nowMs);
    if (ofTenant.size >= this.perTenant)
      throw refusal(`this tenant's keys hold ${this.perTenant} long polls open already`, ofTenant, nowMs);
    const poll: OpenPoll = { deadlineMs };
    ofKey.add(poll);
    ofTenant.add(poll);
    this.byKey.set(caller.actor, ofKey);
    this.byTenant.set(caller.tenant, ofTenant);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      ofKey.delete(poll);
      ofTenant.delete(poll);
      if (ofKey.size === 0 && this.byKey.get(caller.actor) === ofKey) this.byKey.delete(caller.actor);
      if (ofTenant.size === 0 && this.byTenant.get(caller.tenant) === ofTenant) this.byTenant.delete(caller.tenant);
    };
  }
}

/** Retry-After: when the first of the polls holding the cap ends (each waits at most its wait_ms). */
function refusal(detail: string, open: Set<OpenPoll>, nowMs: number): LedgerProblem {
  const first = Math.min(...[...open].map((poll) => poll.deadlineMs));
  return new LedgerProblem('RATE_LIMITED', `${detail}; try again when one has answered`, {
    retryAfterSeconds: Math.max(1, Math.ceil((first - nowMs) / 1000)),
  });
}

const LONG_POLL_KEY = 'ledger:long-poll';

@Injectable()
export class LongPollInterceptor implements NestInterceptor {
  constructor(
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(LongPollLimiter) private readonly limiter: LongPollLimiter,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const param = this.reflector.get<string | undefined>(LONG_POLL_KEY, context.getHandler());
    const request = context.switchToHttp().getRequest<FastifyRequest & RequestWithCaller>();
    const raw = (request.query as Record<string, unknown> | undefined)?.[param ?? ''];
    const waitMs = Number(Array.isArray(raw) ? raw[0] : raw);
    // wait_ms=0 answers at once: not a long poll. A malformed value is the handler's 400.
    if (param === undefined || request.caller === undefined || !(waitMs > 0)) return next.handle();
    const nowMs = Date.now();
    const leave = this.limiter.enter(request.caller, nowMs, nowMs + waitMs);
    // The slot is the caller's until its answer is sent or its socket is gone, whichever is first.
    const socket = request.raw.socket;
    const done = () => {
      socket?.off('close', done);
      leave();
    };
    socket?.once('close', done);
    return next.handle().pipe(finalize(done));
  }
}

/** Marks a route as a long poll whose wait is the query parameter `param`: capped by LongPollLimiter. */
export const LongPoll = (param: string) =>
  applyDecorators(SetMetadata(LONG_POLL_KEY, param), UseInterceptors(LongPollInterceptor));

export const longPollLimiterProvider = {
  provide: LongPollLimiter,
  inject: [CONFIG],
  useFactory: (config: LedgerConfig) => new LongPollLimiter(config.longPollsPerKey, config.longPollsPerTenant),
};
