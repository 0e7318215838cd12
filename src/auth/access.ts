import { SetMetadata } from '@nestjs/common';
import type { Role } from '../http/caller';

/** What a route needs. Every route declares one; a route without it is refused by the guard. */
export type Access = 'public' | 'read' | 'write' | 'admin';

export const ACCESS_KEY = 'ledger:access';
export const RequireAccess = (access: Access) => SetMetadata(ACCESS_KEY, access);

export const ROLE_ACCESS: Record<Role, readonly Access[]> = {
  runtime: ['read', 'write'],
  auditor: ['read'],
  admin: ['read', 'admin'],
};
