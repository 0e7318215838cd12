import { LedgerProblem } from '@recovery-ledger/core';
import { pageOf } from '../page-cursor';
import { scopedKey } from '../projection';
import type { QueryScope, ReadPosition } from '../read-model';
import { evidenceReport, type EvidenceReport, type EvidenceTrailDoc } from './evidence-trail.projection';

export interface EvidenceQuery extends ReadPosition {
  operationRef: string;
  limit: number;
  /** Entries after this revision (-1: from the first). */
  afterRevision: number;
}

export interface EvidenceAnswer extends EvidenceReport {
  next_cursor?: string;
  as_of_position: number;
}

/** One operation's evidence trail, a page of its entries at a time (docs/contract.md §5). */
export function evidenceOf({ readModel, tenant, asOf }: QueryScope, query: EvidenceQuery): EvidenceAnswer {
  const { operationRef, limit, afterRevision } = query;
  const doc = readModel.getDoc<EvidenceTrailDoc>('evidence_trail', scopedKey(tenant, operationRef));
  if (!doc)
    throw new LedgerProblem(
      'OPERATION_NOT_FOUND',
      'the operation has no events (or they are not projected yet: see wait_for_position)',
    );
  const after = doc.entries.filter((entry) => entry.revision > afterRevision);
  const { page: entries, next } = pageOf(after, limit, (last) => [last.revision]);
  return {
    ...evidenceReport(doc, entries),
    ...next,
    as_of_position: asOf,
  };
}
