import type { ChainBreak } from '../../store/hash-chain';
import { parseOperationStream } from '../../store/stream-names';
import { CliError } from '../cli-errors';
import { requireLocal, withLocalStore, type GlobalOptions } from '../ledger-source';
import { auditLog } from '../log-scan';
import { writeJson } from '../text-format';

export interface VerifyOptions {
  json?: boolean;
}

const MEANING: Record<ChainBreak['reason'], string> = {
  hash_mismatch: 'its content no longer hashes to its recorded hash: the event was changed after it was written',
  prev_hash_mismatch: 'its prev_hash is not the hash of the event before it: an earlier event was replaced, removed or inserted',
  revision_gap: 'its revision does not follow the one before it: an event is missing',
};

export function describeBreak(found: ChainBreak): string {
  const operation = parseOperationStream(found.stream);
  const where = operation ? `operation ${operation.operationRef} (tenant ${operation.tenant})` : `stream ${found.stream}`;
  return `${where}: first bad event ${found.event_id} at revision ${found.revision}, ${found.reason}: ${MEANING[found.reason]}`;
}

export async function verifyCommand(global: GlobalOptions, options: VerifyOptions): Promise<void> {
  requireLocal(global, 'verify');
  const audit = await withLocalStore(global, async ({ store }) => auditLog(store));
  const broken = audit.breaks.length;
  if (options.json) {
    writeJson(process.stdout, { ok: broken === 0, events: audit.events, streams: audit.streams.length, breaks: audit.breaks });
  } else {
    for (const found of audit.breaks) process.stdout.write(`BROKEN ${describeBreak(found)}\n`);
    process.stdout.write(
      `verified ${audit.events} events in ${audit.streams.length} streams: ${broken === 0 ? 'every hash chain holds' : `${broken} broken`}\n`,
    );
  }
  // Non-zero, like `git fsck`, so a cron job or a CI step fails on a tampered log.
  if (broken > 0) throw new CliError(`${broken} of ${audit.streams.length} streams fail their hash chain`);
}
