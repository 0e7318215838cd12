import type { Role } from '../http/caller';

/** What a route needs. Every route declares one; a route without it is refused by the guard. */
export type Access = 'public' | 'read' | 'write' | 'admin';

/**
 * SPEC §8, issue 6: a runtime submits facts and reads its tenant; an auditor reads; an admin reads
 * and rebuilds and exports. Nobody both writes and administers, so a leaked runtime key cannot
 * export the log and an admin key cannot forge facts.
 */
export const ROLE_ACCESS: Record<Role, readonly Access[]> = {
  runtime: ['read', 'write'],
  auditor: ['read'],
  admin: ['read', 'admin'],
};
