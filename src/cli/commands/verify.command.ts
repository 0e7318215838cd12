import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StoredEvent } from '../../store/event-store.port';
import { verifyChain, type ChainBreak } from '../../store/hash-chain';
import { parseOperationStream } from '../../store/stream-names';
import { CliError } from '../cli-errors';
import { remoteLedger, withLocalStore, type GlobalOptions, type RemoteLedger } from '../ledger-source';
import { readArchive } from '../log-archive';
import { auditLog, type LogAudit } from '../log-scan';
import { counted, writeJson } from '../text-format';
import { exportRemote, openSink } from './export.command';

export interface VerifyOptions {
  json?: boolean;
}

const MEANING: Record<ChainBreak['reason'], string> = {
  hash_mismatch: 'its content no longer hashes to its recorded hash: the event was changed after it was written',
  prev_hash_mismatch: 'its prev_hash is not the hash of the event before it: an earlier event was replaced, removed or inserted',
  revision_gap: 'its revision does not follow the one before it: an event is missing',
  position_order: 'it stands in the log before an earlier event of its stream: events were moved',
};

export function describeBreak(found: ChainBreak): string {
  const operation = parseOperationStream(found.stream);
  const where = operation ? `operation ${operation.operationRef} (tenant ${operation.tenant})` : `stream ${found.stream}`;
  return `${where}: first bad event ${found.event_id} at revision ${found.revision}, ${found.reason}: ${MEANING[found.reason]}`;
}

/** The chains of an export, stream by stream, as auditLog reports those of a store. */
export function auditEvents(events: readonly StoredEvent[]): LogAudit {
  const streams = new Map<string, StoredEvent[]>();
  for (const event of events) {
    const list = streams.get(event.stream);
    if (list) list.push(event);
    else streams.set(event.stream, [event]);
  }
  const audits = [...streams].map(([stream, list]) => {
    const found = verifyChain(list);
    return { stream, events: list.length, last_hash: list[list.length - 1].metadata.hash, ...(found ? { break: found } : {}) };
  });
  return { events: events.length, streams: audits, breaks: audits.flatMap((audit) => (audit.break ? [audit.break] : [])) };
}

/**
 * Against a service: its admin export of the key's tenant, checked here. The chains are the
 * service's own record, so what arrives is checked as much as what is stored.
 */
async function auditRemote(remote: RemoteLedger): Promise<LogAudit> {
  const dir = mkdtempSync(join(tmpdir(), 'recovery-ledger-verify-'));
  try {
    const file = join(dir, 'export.ndjson');
    const sink = openSink(file);
    await exportRemote(remote, sink);
    await sink.commit();
    return auditEvents((await readArchive(file)).events);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function verifyCommand(global: GlobalOptions, options: VerifyOptions): Promise<void> {
  const remote = remoteLedger(global);
  const audit = remote ? await auditRemote(remote) : await withLocalStore(global, async ({ store }) => auditLog(store));
  const broken = audit.breaks.length;
  if (options.json) {
    writeJson(process.stdout, { ok: broken === 0, events: audit.events, streams: audit.streams.length, breaks: audit.breaks });
  } else {
    for (const found of audit.breaks) process.stdout.write(`BROKEN ${describeBreak(found)}\n`);
    process.stdout.write(
      `verified ${counted(audit.events, 'event')} in ${counted(audit.streams.length, 'stream')}: ${broken === 0 ? 'every hash chain holds' : `${broken} broken`}\n`,
    );
  }
  // Non-zero, like `git fsck`, so a cron job or a CI step fails on a tampered log.
  if (broken > 0) throw new CliError(`${broken} of ${counted(audit.streams.length, 'stream')} ${broken === 1 ? 'fails its' : 'fail their'} hash chain`);
}
