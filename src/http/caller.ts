import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { Caller, RequestWithCaller } from '../auth/caller';

export type { Caller, RequestWithCaller, Role } from '../auth/caller';

export const CallerParam = createParamDecorator((_data: unknown, context: ExecutionContext): Caller => {
  const request = context.switchToHttp().getRequest<RequestWithCaller>();
  if (!request.caller) throw new Error('no caller on the request: the auth guard did not run');
  return request.caller;
});
