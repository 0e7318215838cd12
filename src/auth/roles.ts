import { isSubmittedFactType, SUBMITTED_FACTS } from '@recovery-ledger/core';
import type { Role } from './caller';

/** What a route needs. Every route declares one; a route without it is refused by the guard. */
export type Access = 'public' | 'read' | 'write' | 'work' | 'admin' | 'metrics';

/**
 * docs/contract.md §8: a runtime submits facts and reads its tenant; an approver reads its tenant
 * and records approvals, nothing else; an operator reads its tenant and records operator facts
 * (manual verification, cancel, reopen, acknowledge), nothing else; an auditor reads; an admin reads, rebuilds, exports and
 * scrapes its tenant's metrics; a metrics key scrapes the whole process and reads nothing. Nobody
 * both writes and administers, so a leaked runtime key cannot export the log and an admin key
 * cannot forge facts; which facts a writer may submit is decided by `mayRecord` below. The work
 * feed (`work`: take, renew and release items) is the runtime's: an approver that could lease a
 * step could also hold it away from every worker (docs/security.md, "Roles and tenants").
 */
export const ROLE_ACCESS: Record<Role, readonly Access[]> = {
  runtime: ['read', 'write', 'work'],
  approver: ['read', 'write'],
  operator: ['read', 'write'],
  auditor: ['read'],
  admin: ['read', 'admin', 'metrics'],
  metrics: ['metrics'],
};

export const ROLES: readonly Role[] = ['runtime', 'approver', 'operator', 'auditor', 'admin', 'metrics'];

/** The tenant field of a metrics key: it belongs to no tenant and reads no stream. */
export const NO_TENANT = '*';

/**
 * Which facts a writing role may submit. An approval is the human gate on a step the tool itself
 * asked to be approved (docs/contract.md §4): if the runtime that asked could answer, the gate
 * would protect nothing. `selfApproval` is the explicit setting that lets a runtime key approve.
 */
export function mayRecord(
  role: Role,
  factType: string,
  options: { selfApproval: boolean; localMode: boolean },
): boolean {
  if (options.localMode) return true;
  if (!isSubmittedFactType(factType)) return role === 'runtime';
  // Who records each fact is in its one definition (packages/core/src/facts/submitted-facts.ts). A
  // person's actions on an escalation (docs/contract.md §4.10) are the operator's alone: the runtime
  // that escalated may not settle or reopen its own step, and an operator records nothing else.
  const recordedBy = SUBMITTED_FACTS[factType].recordedBy;
  if (recordedBy === 'approver') return role === 'approver' || (role === 'runtime' && options.selfApproval);
  return role === recordedBy;
}
