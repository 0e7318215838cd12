/**
 * One key per role of docs/contract.md §8 that may hold a key of a tenant (the tenant `acme`), for
 * the operator-fact tests: the key of a role, the key id the ledger records as a fact's actor, and
 * the LEDGER_API_KEYS value that configures them all.
 */
import { createHash } from 'node:crypto';

export type Role = 'runtime' | 'approver' | 'operator' | 'auditor' | 'admin';
export const ROLES: readonly Role[] = ['runtime', 'approver', 'operator', 'auditor', 'admin'];
export const keyOf = (role: Role) =>
  `acme-${role}-${createHash('sha256').update(`acme/${role}`).digest('hex').slice(0, 20)}`;
/** The actor the ledger records for a key (src/auth/api-keys.ts): its hash, never the key. */
export const idOf = (key: string) => `key_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
export const KEYS = ROLES.map((role) => `${keyOf(role)}:${role}:acme`).join(',');
export const auth = (role: Role) => ({ authorization: `Bearer ${keyOf(role)}` });
