import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { findRollback, type RollbackReport } from '../../integrity/history-rollback';
import { ledgerEventProblem } from '../../integrity/integrity-monitor';
import { verifyReadModels, type ReadModelReport } from '../../projection-engine/read-model-verification';
import { readModelFile } from '../../store/read-model.port';
import { openReadModel } from '../../adapters/store.factory';
import type { StoredEvent } from '../../store/event-store.port';
import { GENESIS_HASH, nextLogHash, verifyChain, type ChainBreak } from '../../integrity/hash-chain';
import type { ArchiveFooter } from '../../store/log-archive-format';
import {
  auditLog,
  takeCheckpoint,
  type IntegrityFinding,
  type LogAudit,
  type LogCheckpoint,
} from '../../integrity/log-audit';
import { parseOperationStream } from '../../store/stream-names';
import { CliError, usageError } from '../cli-errors';
import { remoteLedger, withLocalStore, type GlobalOptions, type RemoteLedger } from '../ledger-source';
import { readArchive } from '../log-archive';
import { counted, writeJson } from '../text-format';
import { exportRemote, openSink } from './export.command';

const MEANING: Record<ChainBreak['reason'], string> = {
  hash_mismatch: 'its content no longer hashes to its recorded hash: the event was changed after it was written',
  prev_hash_mismatch:
    'its prev_hash is not the hash of the event before it: an earlier event was replaced, removed or inserted',
  revision_gap: 'its revision does not follow the one before it: an event is missing',
  position_order: 'it stands in the log before an earlier event of its stream: events were moved',
};

/**
 * An export checked offline: each stream's chain, and, where the file carries them, each stream's
 * anchored head (a stream cut or dropped from the file no longer meets it) and the log anchor.
 */
export function auditEvents(
  events: readonly StoredEvent[],
  footer?: Pick<ArchiveFooter, 'heads' | 'log_anchor'>,
): LogAudit {
  const streams = new Map<string, StoredEvent[]>();
  for (const event of events) {
    const list = streams.get(event.stream);
    if (list) list.push(event);
    else streams.set(event.stream, [event]);
  }
  const findings: IntegrityFinding[] = [];
  const audits = [...streams].map(([stream, list]) => {
    const found = verifyChain(list);
    if (found)
      findings.push({
        kind: found.reason,
        stream,
        revision: found.revision,
        event_id: found.event_id,
        detail: MEANING[found.reason],
      });
    return { stream, events: list.length, last_hash: String(list[list.length - 1].metadata.hash) };
  });
  if (footer?.heads) {
    const heads = new Map(footer.heads.map((head) => [head.stream, head]));
    for (const audit of audits) {
      const head = heads.get(audit.stream);
      heads.delete(audit.stream);
      if (!head)
        findings.push({
          kind: 'missing_head',
          stream: audit.stream,
          detail: 'the file holds a stream its footer has no head for',
        });
      else if (head.revision !== audit.events - 1 || head.hash !== audit.last_hash) {
        findings.push({
          kind: 'head_mismatch',
          stream: audit.stream,
          detail: `the stream ends at revision ${audit.events - 1}; its anchored head is revision ${head.revision}`,
        });
      }
    }
    for (const head of heads.values()) {
      findings.push({
        kind: 'stream_deleted',
        stream: head.stream,
        revision: head.revision,
        detail: 'the footer anchors a stream the file does not hold',
      });
    }
  }
  let logHash = GENESIS_HASH;
  for (const event of events)
    logHash = nextLogHash(logHash, {
      stream: event.stream,
      revision: event.revision,
      hash: String(event.metadata.hash),
    });
  const last = events[events.length - 1];
  if (footer?.log_anchor && (footer.log_anchor.log_hash !== logHash || footer.log_anchor.events !== events.length)) {
    findings.push({
      kind: 'log_anchor_mismatch',
      detail: "the file's events do not chain to the log anchor in its footer",
    });
  }
  const broken = [...new Set(findings.flatMap((finding) => (finding.stream ? [finding.stream] : [])))];
  return {
    ok: findings.length === 0,
    events: events.length,
    streams: audits,
    stream_count: audits.length,
    anchored: footer?.heads !== undefined,
    recomputed: { position: last?.position ?? 0, events: events.length, log_hash: logHash },
    findings,
    broken_streams: broken,
  };
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
    return await auditArchive(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface VerifyOptions {
  json?: boolean;
  /** Also rebuild every projection in memory and compare it with the stored read model. */
  readModels?: boolean;
  /** An earlier checkpoint file: the log must have only grown since. */
  since?: string;
  /** Write the checkpoint of the log as verified now, to keep outside the store. */
  checkpointOut?: string;
  /** Check an export file offline instead of a store: chains, the heads and the anchor in its footer. */
  archive?: string;
  /**
   * The head witness the service keeps outside the data directory (default LEDGER_HEAD_WITNESS_FILE):
   * a log shorter than it, or holding another event at its head, was rolled back.
   */
  witness?: string;
  /** Only what follows the data directory's verified checkpoint, as the service checks it at start. */
  tail?: boolean;
}

export function describeFinding(finding: IntegrityFinding): string {
  const operation = finding.stream === undefined ? undefined : parseOperationStream(finding.stream);
  const where =
    finding.stream === undefined
      ? 'the log'
      : operation
        ? `operation ${operation.operationRef} (tenant ${operation.tenant})`
        : `stream ${finding.stream}`;
  if (finding.event_id !== undefined && isChainReason(finding.kind)) {
    return `${where}: first bad event ${finding.event_id} at revision ${finding.revision}, ${finding.kind}: ${finding.detail}`;
  }
  return `${where}: ${finding.kind}: ${finding.detail}`;
}

const isChainReason = (kind: string): kind is ChainBreak['reason'] => kind in MEANING;

function readCheckpoint(file: string): LogCheckpoint {
  let parsed: LogCheckpoint;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as LogCheckpoint;
  } catch (error) {
    throw new CliError(`${file} is not a readable checkpoint: ${(error as Error).message}`);
  }
  if (
    parsed?.format !== 'recovery-ledger-checkpoint' ||
    !Array.isArray(parsed.heads) ||
    typeof parsed.anchor?.log_hash !== 'string'
  ) {
    throw new CliError(`${file} is not a recovery-ledger checkpoint`);
  }
  return parsed;
}

interface LocalVerification {
  audit: LogAudit;
  readModels?: ReadModelReport;
  /** Evidence that the log is an older copy (docs/security.md, "A log rolled back"). */
  rollback?: RollbackReport;
  since?: LogCheckpoint;
}

/** What `--since` proved, in the checkpoint's own terms (docs/reliability.md, "verify --since"). */
function sinceReport(since: LogCheckpoint, audit: LogAudit) {
  return {
    checkpoint_taken_at: since.taken_at,
    only_grew: audit.ok,
    events_then: since.anchor.events,
    position_then: since.anchor.position,
    events_now: audit.recomputed.events,
    heads_then: since.heads.length,
  };
}

function describeSince(since: LogCheckpoint, audit: LogAudit): string {
  const added = audit.recomputed.events - since.anchor.events;
  return (
    `since the checkpoint of ${since.taken_at}: the log only grew. Its first ${counted(since.anchor.events, 'event')} ` +
    `(up to position ${since.anchor.position}) are the ones the checkpoint recorded, in the same order (they hash to its log hash), ` +
    `and each of its ${counted(since.heads.length, 'stream head')} is still there at the same revision with the same hash; ` +
    `${counted(added, 'event')} appended since\n`
  );
}

async function verifyLocal(global: GlobalOptions, options: VerifyOptions): Promise<LocalVerification> {
  const since = options.since ? readCheckpoint(options.since) : undefined;
  if (options.witness && !existsSync(options.witness)) throw new CliError(`no head witness at ${options.witness}`);
  return withLocalStore(global, async ({ store, config }) => {
    const audit = await auditLog(store, { anchorKey: config.anchorKey, checkEvent: ledgerEventProblem, since });
    // Every check above passes on an older copy of the whole log: only what has seen more says so.
    const rollback = await findRollback(store, {
      dataDir: config.dataDir,
      witnessFile: options.witness ?? config.headWitnessFile,
      anchorKey: config.anchorKey,
    });
    if (options.checkpointOut && audit.ok && rollback.findings.length === 0) {
      const checkpoint = await takeCheckpoint(store, audit, new Date().toISOString());
      writeFileSync(options.checkpointOut, `${JSON.stringify(checkpoint, null, 2)}\n`);
    }
    if (!options.readModels) return { audit, rollback, since };
    const file = readModelFile(config.dataDir);
    if (!existsSync(file)) throw new CliError(`no read model at ${file}`);
    const readModel = openReadModel({ file, readCacheBytes: 0 });
    try {
      for (const projection of LEDGER_PROJECTIONS) readModel.register(projection);
      return { audit, rollback, since, readModels: await verifyReadModels(store, readModel, LEDGER_PROJECTIONS) };
    } finally {
      readModel.close();
    }
  });
}

async function auditArchive(file: string): Promise<LogAudit> {
  const archive = await readArchive(file);
  return auditEvents(archive.events, archive.footer);
}

export async function verifyCommand(global: GlobalOptions, options: VerifyOptions): Promise<void> {
  const remote = remoteLedger(global);
  if (options.tail) {
    if (remote || options.archive || options.readModels || options.since || options.checkpointOut || options.witness)
      throw usageError('--tail works alone, on a data directory (--data-dir)');
    const { verifyTailCommand } = await import('./verify-tail');
    return verifyTailCommand(global, options, describeFinding);
  }
  if (remote && (options.readModels || options.since || options.checkpointOut || options.witness)) {
    throw usageError('--read-models, --since, --checkpoint-out and --witness work on a data directory (--data-dir)');
  }
  if (options.archive && (options.readModels || options.since || options.checkpointOut || options.witness)) {
    throw usageError(
      '--read-models, --since, --checkpoint-out and --witness work on a data directory, not on --archive',
    );
  }
  const { audit, readModels, rollback, since }: LocalVerification = options.archive
    ? { audit: await auditArchive(options.archive) }
    : remote
      ? { audit: await auditRemote(remote) }
      : await verifyLocal(global, options);
  const rolledBack = (rollback?.findings.length ?? 0) > 0;
  const broken = audit.broken_streams.length;
  const logFaults = audit.findings.filter((finding) => finding.stream === undefined).length;
  const chainBreaks = audit.findings.filter((finding) => isChainReason(finding.kind));
  if (options.json) {
    writeJson(process.stdout, {
      ok: audit.ok && (readModels?.ok ?? true) && !rolledBack,
      events: audit.events,
      streams: audit.streams.length,
      anchored: audit.anchored,
      breaks: chainBreaks.map(({ stream, revision, event_id, kind }) => ({ stream, revision, event_id, reason: kind })),
      findings: audit.findings,
      broken_streams: audit.broken_streams,
      ...(since ? { since: sinceReport(since, audit) } : {}),
      ...(readModels ? { read_models: readModels } : {}),
      ...(rollback
        ? {
            rollback: {
              rolled_back: rolledBack,
              witness: rollback.witness !== undefined,
              head: rollback.head,
              findings: rollback.findings,
            },
          }
        : {}),
    });
  } else {
    for (const finding of audit.findings) process.stdout.write(`BROKEN ${describeFinding(finding)}\n`);
    process.stdout.write(
      `verified ${counted(audit.events, 'event')} in ${counted(audit.streams.length, 'stream')}: ${audit.ok ? 'every hash chain holds' : `${broken} broken${logFaults > 0 ? `, and the log anchor does not hold` : ''}`}\n`,
    );
    for (const finding of rollback?.findings ?? [])
      process.stdout.write(`ROLLED BACK ${finding.kind}: ${finding.detail}\n`);
    if (rollback?.witness && !rolledBack) {
      process.stdout.write(
        `head witness of ${rollback.witness.written_at} (position ${rollback.witness.position}): the log holds it${rollback.head.position > rollback.witness.position ? ' and has grown since' : ''}\n`,
      );
    }
    if (since && audit.ok) process.stdout.write(describeSince(since, audit));
    if (readModels) {
      for (const difference of readModels.differences) {
        process.stdout.write(`READ MODEL ${difference.projection} ${difference.key}: ${difference.kind}\n`);
      }
      const differing = readModels.projections.filter((projection) => projection.differences > 0);
      process.stdout.write(
        readModels.ok
          ? `read models: all ${readModels.projections.length} equal what the log gives\n`
          : `read models: ${differing.map((projection) => `${projection.name} (${projection.differences} differences)`).join(', ')} differ from what the log gives; the service rebuilds them at start\n`,
      );
    }
  }
  // Non-zero, like `git fsck`, so a cron job or a CI step fails on a tampered log.
  if (!audit.ok) {
    const streams = counted(Math.max(audit.streams.length, broken), 'stream');
    throw new CliError(
      broken > 0
        ? `${broken} of ${streams} ${broken === 1 ? 'fails its' : 'fail their'} hash chain${logFaults > 0 ? ', and the log anchor does not hold' : ''}`
        : 'the log anchor does not hold',
    );
  }
  if (rolledBack) {
    throw new CliError(
      'HISTORY_ROLLED_BACK: the log is behind what the ledger recorded before (it was restored from an older copy); the service refuses writes on it',
    );
  }
  if (readModels && !readModels.ok) throw new CliError('a read model differs from what the log gives');
}
