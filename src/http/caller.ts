import { createParamDecorator, type ExecutionContext } from '@nestjs/common';

export type Role = 'runtime' | 'auditor' | 'admin' | 'approver' | 'metrics';

/** Who is calling: resolved once per request by the auth guard, read by handlers. */
export interface Caller {
  tenant: string;
  /** The key's id (never the key itself), recorded as the actor of each event. */
  actor: string;
  role: Role;
  /** Local mode's one caller (no keys configured, loopback only). */
  local?: true;
}

export interface RequestWithCaller {
  caller?: Caller;
}

export const CallerParam = createParamDecorator((_data: unknown, context: ExecutionContext): Caller => {
  const request = context.switchToHttp().getRequest<RequestWithCaller>();
  if (!request.caller) throw new Error('no caller on the request: the auth guard did not run');
  return request.caller;
});
