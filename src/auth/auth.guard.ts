import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { LedgerProblem } from '@recovery-ledger/core';
import type { Caller, RequestWithCaller } from './caller';
import { ACCESS_KEY, ROLE_ACCESS, type Access } from './access';
import { findKey, type ApiKeyEntry } from './api-keys';
import { bearerToken } from './bearer';

export const API_KEYS = Symbol('API_KEYS');

/** In local mode (no keys configured, loopback only) the one caller may do everything. */
export const LOCAL_CALLER: Caller = { tenant: 'default', actor: 'local', role: 'admin', local: true };

const FORBIDDEN_ACTION: Partial<Record<Access, string>> = {
  write: 'submit facts',
  work: 'take, renew or release work items',
  metrics: 'read metrics',
};

@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(API_KEYS) private readonly keys: readonly ApiKeyEntry[],
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const access = this.reflector.getAllAndOverride<Access | undefined>(ACCESS_KEY, [
      context.getHandler(),
      context.getClass(),
    ]);
    // Fail closed: a route that forgot to declare its access is nobody's.
    if (access === undefined) throw new LedgerProblem('FORBIDDEN', 'this route declares no access rule');
    if (access === 'public') return true;
    const request = context.switchToHttp().getRequest<FastifyRequest & RequestWithCaller>();
    if (this.keys.length === 0) {
      request.caller = LOCAL_CALLER;
      return true;
    }
    const token = bearerToken(request.headers.authorization);
    if (token === undefined) throw new LedgerProblem('UNAUTHENTICATED', 'send Authorization: Bearer <key>');
    const key = findKey(this.keys, token);
    if (!key) throw new LedgerProblem('UNAUTHENTICATED', 'the key is not known');
    if (!ROLE_ACCESS[key.role].includes(access)) {
      throw new LedgerProblem('FORBIDDEN', `the ${key.role} role may not ${FORBIDDEN_ACTION[access] ?? 'do this'}`);
    }
    request.caller = { tenant: key.tenant, actor: key.id, role: key.role };
    return true;
  }
}
