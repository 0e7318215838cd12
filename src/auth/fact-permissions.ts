import { isOperatorFactType, LedgerProblem } from '@recovery-ledger/core';
import type { Caller } from './caller';
import { mayRecord } from './roles';

export interface ApprovalSettings {
  /** LEDGER_ALLOW_SELF_APPROVAL: a runtime key may record ApprovalRecorded too. */
  selfApproval: boolean;
}

/**
 * Refuses (403) a submit that holds a fact the caller's role may not record, naming the first such
 * fact; the whole submit is refused, nothing of it is stored (docs/contract.md §8).
 */
export function checkFactPermissions(
  caller: Caller,
  facts: ReadonlyArray<{ type: string }>,
  settings: ApprovalSettings,
): void {
  const options = { selfApproval: settings.selfApproval, localMode: caller.local === true };
  const index = facts.findIndex((fact) => !mayRecord(caller.role, fact.type, options));
  if (index < 0) return;
  const type = facts[index].type;
  const detail =
    type === 'ApprovalRecorded'
      ? 'only an approver key may record an approval'
      : isOperatorFactType(type)
        ? `only an operator key may record ${type}`
        : `the ${caller.role} role may not record ${type}`;
  throw new LedgerProblem('FORBIDDEN', detail, { field: `events[${index}].type` });
}
