import { Inject, Injectable, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import {
  getOptionsToken,
  getStorageToken,
  ThrottlerGuard,
  type ThrottlerLimitDetail,
  type ThrottlerModuleOptions,
  type ThrottlerStorage,
} from '@nestjs/throttler';
import { findKey, type ApiKeyEntry } from '../../auth/api-keys';
import { API_KEYS } from '../../auth/auth.guard';
import { bearerToken } from '../../auth/bearer';
import { LedgerProblem } from '@recovery-ledger/core';
import { QueueThrottlerStorage } from './rate-limit.storage';

/** One window of a minute: LEDGER_RATE_LIMIT_PER_MINUTE requests per key in it. */
export const RATE_LIMIT_WINDOW_MS = 60_000;

export function rateLimitOptions(perMinute: number): ThrottlerModuleOptions {
  // The library's storage with O(1) pruning: the same answers, a cost per request that does not
  // grow with the hits in the window (see rate-limit.storage.ts).
  return {
    throttlers: [{ name: 'default', ttl: RATE_LIMIT_WINDOW_MS, limit: perMinute }],
    storage: new QueueThrottlerStorage(),
  };
}

/**
 * Per-key rate limits (@nestjs/throttler), in front of authentication. A request with a known key
 * counts against that key's id, across every route, so one runtime cannot starve the others; any
 * other request (no key, an unknown key, local mode) counts against its address, so guessing keys
 * is limited like anything else. Registered before the auth guard, so a 401 costs a hit too.
 */
@Injectable()
export class RateLimitGuard extends ThrottlerGuard {
  constructor(
    @Inject(getOptionsToken()) options: ThrottlerModuleOptions,
    @Inject(getStorageToken()) storage: ThrottlerStorage,
    @Inject(Reflector) reflector: Reflector,
    @Inject(API_KEYS) private readonly keys: readonly ApiKeyEntry[],
  ) {
    super(options, storage, reflector);
  }

  protected override async getTracker(request: Record<string, any>): Promise<string> {
    const token = bearerToken(request.headers?.authorization);
    const key = token === undefined ? undefined : findKey(this.keys, token);
    return key ? `key:${key.id}` : `ip:${await super.getTracker(request)}`;
  }

  /** One bucket per caller for the whole API (the default keys by route as well). */
  protected override generateKey(_context: ExecutionContext, tracker: string, throttler: string): string {
    return `${throttler}:${tracker}`;
  }

  protected override async throwThrottlingException(
    _context: ExecutionContext,
    detail: ThrottlerLimitDetail,
  ): Promise<void> {
    throw new LedgerProblem('RATE_LIMITED', `more than ${detail.limit} requests in a minute; try again later`, {
      retryAfterSeconds: Math.max(1, Math.ceil(detail.timeToBlockExpire)),
    });
  }
}
