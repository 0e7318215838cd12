import type { Directive, RecoveryItem, VerificationOutcome } from './ledger-api.types';
import { LedgerError } from './ledger-errors';
import { verify, type ExecuteOptions, type LedgerApi, type Lookup } from './execute-write';

export type RecoveryEntryResult =
  /** The lookup ran and its outcome is recorded; `directive` says what follows. */
  | 'verified'
  /** The ledger refused the outcome (a not_found inside the consistency window: see notBefore). */
  | 'refused'
  /** No lookup is registered for the tool: reported, never guessed. */
  | 'no_lookup'
  /** Recording failed (the ledger was unreachable); the operation stays in the recovery list. */
  | 'failed';

export interface RecoveryEntry {
  operationRef: string;
  tool: string;
  runId: string;
  /** Where the operation stood when it was listed. */
  listedStatus: RecoveryItem['status'];
  attempt: number;
  result: RecoveryEntryResult;
  outcome?: VerificationOutcome;
  status?: string;
  directive?: Directive;
  notBefore?: string;
  code?: string;
}

export interface RecoveryReport {
  entries: RecoveryEntry[];
  /** The earliest instant a refused check may run again, for the caller's scheduler. */
  nextCheckAt?: string;
  /** Tools that had operations to recover and no registered lookup. */
  missingLookups: string[];
}

export interface RecoverOptions extends Pick<ExecuteOptions, 'now' | 'traceparent' | 'tracestate' | 'signal'> {
  /** Leave alone operations younger than this, which a live worker may still be finishing. */
  olderThanMs?: number;
}

/**
 * What a restarted worker runs first (docs/contract.md §4 crash recovery): every operation the ledger has in
 * flight or verifying is verified through the lookup registered for its tool, by its OWN
 * operation_ref, and the outcome recorded. No new key is ever made here, and nothing is
 * dispatched: what the ledger decides next (retry_ready, succeeded, escalated) comes back in the
 * report for the worker's normal path. The list is read in full before anything is recorded, so
 * entries leaving it while it is paged cannot make a page skip any.
 */
export async function recover(
  ledger: LedgerApi,
  lookups: Readonly<Record<string, Lookup>>,
  options: RecoverOptions = {},
): Promise<RecoveryReport> {
  const trace = { traceparent: options.traceparent, tracestate: options.tracestate };
  const items: RecoveryItem[] = [];
  for await (const item of ledger.recoveryItems({ olderThanMs: options.olderThanMs, ...trace, signal: options.signal }))
    items.push(item);

  const entries: RecoveryEntry[] = [];
  const missing = new Set<string>();
  for (const item of items) {
    // An abort stops between operations: each one is verified and recorded whole, or not touched.
    options.signal?.throwIfAborted();
    const base = {
      operationRef: item.operation_ref,
      tool: item.tool,
      runId: item.run_id,
      listedStatus: item.status,
      attempt: item.attempt,
    };
    const lookup = Object.prototype.hasOwnProperty.call(lookups, item.tool) ? lookups[item.tool] : undefined;
    if (!lookup) {
      missing.add(item.tool);
      entries.push({ ...base, result: 'no_lookup' });
      continue;
    }
    // Stopped between operations: what was verified stays recorded, the rest waits for the next start.
    options.signal?.throwIfAborted();
    try {
      const verified = await verify(ledger, { operationRef: item.operation_ref, tool: item.tool }, lookup, options);
      entries.push({
        ...base,
        result: verified.kind === 'recorded' ? 'verified' : 'refused',
        outcome: verified.outcome,
        status: verified.status,
        directive: verified.directive,
        ...(verified.notBefore ? { notBefore: verified.notBefore } : {}),
        ...(verified.refusal ? { code: verified.refusal.code } : {}),
      });
    } catch (error) {
      // One operation the ledger could not take now does not stop the others; a bug still throws.
      if (!(error instanceof LedgerError)) throw error;
      entries.push({ ...base, result: 'failed', code: error.code });
    }
  }
  const pending = entries
    .filter((entry) => entry.result === 'refused' && entry.notBefore)
    .map((entry) => entry.notBefore as string)
    .sort((a, b) => Date.parse(a) - Date.parse(b));
  return {
    entries,
    ...(pending.length > 0 ? { nextCheckAt: pending[0] } : {}),
    missingLookups: [...missing].sort(),
  };
}
