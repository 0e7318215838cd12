import { randomUUID } from 'node:crypto';
import type { SubmitAnswer } from '@recovery-ledger/core/contract/ledger-api.types';
import { usageError } from '../cli-errors';
import { encodeRef, remoteLedger, type GlobalOptions } from '../ledger-source';
import { writeJson } from '../text-format';

/**
 * The operator's actions on a running service (docs/contract.md §4.10): each is one operator fact
 * submitted with the caller's key, decided by the ledger like any other fact. A refusal prints the
 * problem's stable code (`409 OUTCOME_UNVERIFIED: ...`) and exits 1, as every other command does.
 */
export type OperatorFact =
  | {
      type: 'OutcomeVerifiedManually';
      data: { outcome: 'found_committed' | 'not_found'; note: string; evidence_ref?: string };
    }
  | { type: 'StepCancelled'; data: { reason: string } }
  | { type: 'StepReopened'; data: { attempts: number; reason: string } }
  | { type: 'EscalationAcknowledged'; data: { assignee: string; note?: string } };

export interface OperatorOptions {
  json?: boolean;
}

export interface ResolveOptions extends OperatorOptions {
  found?: string;
  notFound?: boolean;
  note: string;
}

/** `resolve REF --found EVIDENCE_REF --note ...` or `resolve REF --not-found --note ...`. */
export function resolveFact(options: ResolveOptions): OperatorFact {
  if ((options.found === undefined) === (options.notFound !== true))
    throw usageError('resolve needs exactly one of --found <evidence_ref> and --not-found');
  return options.found === undefined
    ? { type: 'OutcomeVerifiedManually', data: { outcome: 'not_found', note: options.note } }
    : {
        type: 'OutcomeVerifiedManually',
        data: { outcome: 'found_committed', note: options.note, evidence_ref: options.found },
      };
}

export async function operatorCommand(
  global: GlobalOptions,
  ref: string,
  fact: OperatorFact,
  options: OperatorOptions,
): Promise<void> {
  const remote = remoteLedger(global);
  // The facts are decided by the service that holds the log, never written past it.
  if (!remote)
    throw usageError(`${fact.type} is recorded through a running service: give --url (and --key, an operator key)`);
  const answer = await remote.postJson<SubmitAnswer>(`/v1/operations/${encodeRef(ref)}/events`, {
    events: [{ event_id: randomUUID(), ...fact }],
  });
  if (options.json) {
    writeJson(process.stdout, answer);
    return;
  }
  const { state } = answer;
  const reason = state.reason ? ` (${state.reason})` : '';
  process.stdout.write(
    `${ref}: ${fact.type} recorded; status ${state.status}${reason}, next ${answer.directive.next_action}, revision ${answer.revision}\n`,
  );
}
