import {
  evidenceReport,
  evolveEvidenceTrail,
  sealEvidenceTrail,
  type EvidenceReport,
  type EvidenceTrailDoc,
} from '@recovery-ledger/projections';
import { operationStream } from '../../store/stream-names';
import { CliError } from '../cli-errors';
import { encodeRef, remoteLedger, withLocalStore, type GlobalOptions } from '../ledger-source';
import { renderTable, writeJson } from '../text-format';

export interface EvidenceOptions {
  json?: boolean;
}

interface EvidencePage extends EvidenceReport {
  next_cursor?: string;
}

/**
 * Locally, the evidence trail is the projection's own fold over the operation's stream: the very
 * function the engine runs, so the answer equals the service's read model once it has caught up,
 * and needs neither the service nor its read model to be there.
 */
async function localEvidence(global: GlobalOptions, ref: string): Promise<EvidenceReport> {
  const events = await withLocalStore(global, ({ store }) => store.readStream(operationStream(global.tenant, ref)));
  if (events.length === 0) throw new CliError(`operation ${ref} has no events in tenant ${global.tenant}`);
  return evidenceReport(
    sealEvidenceTrail(
      events.reduce<EvidenceTrailDoc | undefined>(
        (doc, event) => evolveEvidenceTrail(doc, event),
        undefined,
      ) as EvidenceTrailDoc,
    ),
  );
}

async function remoteEvidence(global: GlobalOptions, ref: string): Promise<EvidenceReport> {
  const remote = remoteLedger(global);
  if (!remote) throw new Error('remote evidence needs --url');
  const path = `/v1/operations/${encodeRef(ref)}/evidence`;
  const { next_cursor: next, ...first } = await remote.get<EvidencePage & { as_of_position?: number }>(path);
  const entries = [...first.entries];
  // The API pages long trails; the report is the whole trail.
  for (let cursor = next; cursor;) {
    const page = await remote.get<EvidencePage>(path, { cursor });
    entries.push(...page.entries);
    cursor = page.next_cursor;
  }
  delete first.as_of_position;
  return { ...first, entries };
}

export function renderEvidence(evidence: EvidenceReport): string {
  const { verdict } = evidence;
  const head = [
    `${evidence.operation_ref}${evidence.tool ? ` (${evidence.side_effect ?? ''} ${evidence.tool}, run ${evidence.run_id ?? '?'})` : ''}`,
    `verdict:   ${verdict.statement}`,
    `commit:    ${verdict.commit_state}, proven by ${verdict.proven_by}${verdict.proof_event_id ? ` (event ${verdict.proof_event_id})` : ''}`,
    `status:    ${verdict.status}${verdict.terminal ? ' (terminal)' : ''}, reason ${verdict.reason}`,
  ];
  if (verdict.evidence_ref) head.push(`evidence:  ${verdict.evidence_ref}`);
  if (verdict.duplicates_prevented > 0) head.push(`duplicate writes prevented: ${verdict.duplicates_prevented}`);
  const table = renderTable(
    ['REV', 'RECORDED AT', 'KIND', 'ACTOR', 'SUMMARY'],
    evidence.entries.map((entry) => [
      String(entry.revision),
      entry.recorded_at,
      entry.kind,
      entry.actor,
      entry.summary,
    ]),
  );
  return `${head.join('\n')}\n\n${table}`;
}

export async function evidenceCommand(global: GlobalOptions, ref: string, options: EvidenceOptions): Promise<void> {
  const evidence = global.url ? await remoteEvidence(global, ref) : await localEvidence(global, ref);
  if (options.json) writeJson(process.stdout, evidence);
  else process.stdout.write(renderEvidence(evidence));
}
