import { ledgerEventProblem } from '../../integrity/integrity-monitor';
import type { IntegrityFinding } from '../../integrity/log-audit';
import { readVerifiedCheckpoint, verifiedCheckpointFile, verifyTail } from '../../integrity/verified-checkpoint';
import { CliError } from '../cli-errors';
import { withLocalStore, type GlobalOptions } from '../ledger-source';
import { counted, writeJson } from '../text-format';

/**
 * `verify --tail`: only what was appended after the data directory's verified checkpoint, as the
 * service checks it at start (docs/reliability.md, "Start-up without a full pass"); the whole-log
 * audit is plain `verify`. Exits 1 on any finding, or when there is no checkpoint to start from.
 */
export async function verifyTailCommand(
  global: GlobalOptions,
  options: { json?: boolean },
  describe: (finding: IntegrityFinding) => string,
): Promise<void> {
  await withLocalStore(global, async ({ store, config }) => {
    const file = verifiedCheckpointFile(config.dataDir);
    const checkpoint = readVerifiedCheckpoint(file);
    if (!checkpoint)
      throw new CliError(`no verified checkpoint at ${file}: run \`recovery-ledger verify\` for the whole log`);
    const check = await verifyTail(store, checkpoint, { anchorKey: config.anchorKey, checkEvent: ledgerEventProblem });
    if (options.json) {
      writeJson(process.stdout, {
        ok: check.ok,
        checkpoint: { position: checkpoint.position, events: checkpoint.events, verified_at: checkpoint.verified_at },
        events_read: check.events_read,
        ...(check.verified ? { verified: { position: check.verified.position, events: check.verified.events } } : {}),
        findings: check.findings,
        broken_streams: check.broken_streams,
      });
    } else {
      for (const finding of check.findings) process.stdout.write(`BROKEN ${describe(finding)}\n`);
      if (check.ok)
        process.stdout.write(
          `verified from the checkpoint of ${checkpoint.verified_at} (position ${checkpoint.position}) to position ${check.verified?.position ?? checkpoint.position}: ${counted((check.verified?.events ?? checkpoint.events) - checkpoint.events, 'event')} appended since, every one chained and anchored (${counted(check.events_read, 'event')} read); the part before it is the whole audit's: run \`recovery-ledger verify\`\n`,
        );
    }
    if (!check.ok)
      throw new CliError(
        `the log fails its check from the verified checkpoint: ${counted(check.findings.length, 'finding')}`,
      );
  });
}
