import { SetMetadata } from '@nestjs/common';
import type { Access } from './roles';

export { ROLE_ACCESS, type Access } from './roles';

export const ACCESS_KEY = 'ledger:access';
export const RequireAccess = (access: Access) => SetMetadata(ACCESS_KEY, access);
