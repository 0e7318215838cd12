import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  MAX_OPERATIONS_PER_REQUEST,
  type OperatorFact,
  type OperatorFactsAnswer,
  type SubmitAnswer,
} from '@recovery-ledger/core';
import { CliError, EXIT, usageError, type ExitCode } from '../cli-errors';
import { encodeRef, problemError, remoteLedger, type GlobalOptions, type RemoteLedger } from '../ledger-source';
import { writeJson } from '../text-format';

/**
 * The operator's actions on a running service (docs/contract.md §4.10): each is one operator fact
 * submitted with the caller's key, decided by the ledger like any other fact. A refusal prints the
 * problem's stable code (`409 OUTCOME_UNVERIFIED: ...`) and exits 1, as every other command does.
 */
export interface OperatorOptions {
  json?: boolean;
  fromFile?: string;
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

/**
 * The refs to act on: those on the command line, then one a line from `--from-file` (`-` for
 * stdin), blank lines and `#` comments skipped, so an incident's list can be worked in one go.
 */
export function refsOf(args: readonly string[], fromFile: string | undefined): string[] {
  const listed =
    fromFile === undefined
      ? []
      : readFileSync(fromFile === '-' ? 0 : fromFile, 'utf8')
          .split(/\r?\n/)
          .map((line) => line.trim())
          .filter((line) => line !== '' && !line.startsWith('#'));
  const refs = [...args, ...listed];
  if (refs.length === 0) throw usageError('name at least one operation_ref, or give --from-file <file> (- for stdin)');
  return refs;
}

/**
 * One fact per ref, each decided on its own (one refusal does not stop the others), one result
 * line per ref; the exit code is the worst of them. A single ref goes the submit route and keeps the
 * one-line error of every other command; several go `POST /v1/operator-facts`, at most
 * MAX_OPERATIONS_PER_REQUEST a request (docs/contract.md §9), a ref named twice acted on once.
 */
export async function operatorCommand(
  global: GlobalOptions,
  refs: readonly string[],
  fact: OperatorFact,
  options: OperatorOptions,
): Promise<void> {
  const remote = remoteLedger(global);
  // The facts are decided by the service that holds the log, never written past it.
  if (!remote)
    throw usageError(`${fact.type} is recorded through a running service: give --url (and --key, an operator key)`);
  if (refs.length === 1) {
    const answer = await submit(remote, refs[0], fact).catch((error: unknown) => {
      throw error instanceof CliError ? withNextStep(refs[0], fact, error) : error;
    });
    if (options.json) writeJson(process.stdout, answer);
    else process.stdout.write(`${resultLine(refs[0], fact, answer)}\n`);
    return;
  }
  const listed = [...new Set(refs)];
  let worst: ExitCode = EXIT.ok;
  for (let start = 0; start < listed.length; start += MAX_OPERATIONS_PER_REQUEST) {
    const batch = listed.slice(start, start + MAX_OPERATIONS_PER_REQUEST);
    const { results } = await remote.postJson<OperatorFactsAnswer>('/v1/operator-facts', {
      fact,
      operations: batch.map((ref) => ({ operation_ref: ref, event_id: randomUUID() })),
    });
    results.forEach((result, index) => {
      const ref = batch[index];
      if (result.outcome === 'recorded') {
        const { answer } = result;
        process.stdout.write(
          options.json ? `${JSON.stringify({ operation_ref: ref, answer })}\n` : `${resultLine(ref, fact, answer)}\n`,
        );
        return;
      }
      const error = withNextStep(ref, fact, problemError(result.problem.status, result.problem));
      worst = Math.max(worst, error.exitCode) as ExitCode;
      if (options.json) process.stdout.write(`${JSON.stringify({ operation_ref: ref, error: error.message })}\n`);
      process.stderr.write(`recovery-ledger: ${ref}: ${error.message}\n`);
    });
  }
  if (worst !== EXIT.ok) {
    throw new CliError(`${fact.type} was not recorded for every operation (see the lines above)`, worst);
  }
}

/**
 * The command that gets past a refusal, where one does: the problem's detail names the ledger's fact
 * (`OutcomeVerifiedManually`, `reassign`), the person at the terminal needs the command that records it.
 */
const NEXT_STEP: Partial<Record<string, (ref: string, fact: OperatorFact) => string>> = {
  OUTCOME_UNVERIFIED: (ref) =>
    `recovery-ledger resolve ${shellWord(ref)} --found <evidence_ref> --note <text> (or --not-found)`,
  ESCALATION_ALREADY_ACKNOWLEDGED: (ref, fact) =>
    `recovery-ledger ack ${shellWord(ref)} --assignee ${
      fact.type === 'EscalationAcknowledged' ? shellWord(fact.data.assignee) : '<name>'
    } --reassign`,
};

/** A word as a shell reads it back: quoted only when it needs to be. */
const shellWord = (word: string) => (/^[\w./@:-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

function withNextStep(ref: string, fact: OperatorFact, error: CliError): CliError {
  const next = error.code === undefined ? undefined : NEXT_STEP[error.code];
  return next === undefined
    ? error
    : new CliError(`${error.message}; that is: ${next(ref, fact)}`, error.exitCode, error.code);
}

function submit(remote: RemoteLedger, ref: string, fact: OperatorFact): Promise<SubmitAnswer> {
  return remote.postJson<SubmitAnswer>(`/v1/operations/${encodeRef(ref)}/events`, {
    events: [{ event_id: randomUUID(), ...fact }],
  });
}

function resultLine(ref: string, fact: OperatorFact, answer: SubmitAnswer): string {
  const { state } = answer;
  const reason = state.reason ? ` (${state.reason})` : '';
  return `${ref}: ${fact.type} recorded; status ${state.status}${reason}, next ${answer.directive.next_action}, revision ${answer.revision}`;
}
