import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { canonicalJson } from '@recovery-ledger/core';
import type { EventStore } from '../store/event-store.port';

/**
 * The log's head as last seen, kept outside the data directory (docs/security.md, "A log rolled
 * back"). Every check inside the store (chains, anchors, their signature) passes on an older copy of
 * the whole directory, since that copy was once the true log; only a record kept elsewhere can say
 * the log used to be longer.
 */
export interface LogHead {
  /** The last event's position (0: an empty log). */
  position: number;
  /** Events in the log and the log chain over them, where the store keeps anchors. */
  events?: number;
  log_hash?: string;
  /** The last event itself: what the log must still hold at `position`. */
  last?: { stream: string; revision: number; hash: string };
}

export interface HeadWitness extends LogHead {
  format: 'recovery-ledger-head-witness';
  version: 1;
  written_at: string;
  /** HMAC-SHA256 under LEDGER_ANCHOR_KEY, when one is set: a witness edited without the key is seen. */
  signature?: string;
}

export type WitnessFindingKind =
  'log_behind_witness' | 'witness_entry_differs' | 'witness_signature_invalid' | 'witness_unreadable';

export interface WitnessFinding {
  kind: WitnessFindingKind;
  detail: string;
}

export class WitnessError extends Error {}

function signed(witness: Omit<HeadWitness, 'signature'>): string {
  const { format, version, position, events, log_hash, last } = witness;
  // written_at is left out: the same head written again signs the same.
  return canonicalJson({
    format,
    version,
    position,
    events: events ?? null,
    log_hash: log_hash ?? null,
    last: last ?? null,
  });
}

export function signWitness(key: string, witness: Omit<HeadWitness, 'signature'>): string {
  return createHmac('sha256', key).update(signed(witness)).digest('hex');
}

function signatureHolds(key: string, witness: HeadWitness): boolean {
  if (!witness.signature || !/^[0-9a-f]{64}$/.test(witness.signature)) return false;
  return timingSafeEqual(Buffer.from(signWitness(key, witness), 'hex'), Buffer.from(witness.signature, 'hex'));
}

/** The log's head now: the anchor where the store keeps one, and the last event. */
export async function currentHead(store: EventStore): Promise<LogHead> {
  const anchor = store.keepsAnchors ? await store.logAnchor() : undefined;
  const position = anchor?.position ?? (await store.headPosition());
  if (position <= 0) return { position: 0, ...(store.keepsAnchors ? { events: 0, log_hash: '0'.repeat(64) } : {}) };
  const last = await eventAt(store, position);
  return {
    position,
    ...(anchor ? { events: anchor.events, log_hash: anchor.log_hash } : {}),
    ...(last ? { last } : {}),
  };
}

async function eventAt(store: EventStore, position: number): Promise<LogHead['last']> {
  const [event] = await store.readAll({ after: position - 1, limit: 1 });
  if (!event || event.position !== position) return undefined;
  return { stream: event.stream, revision: event.revision, hash: String(event.metadata.hash) };
}

/** The witness in `file`; undefined when there is none yet. */
export function readHeadWitness(file: string): HeadWitness | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new WitnessError(`the head witness ${file} cannot be read: ${(error as Error).message}`);
  }
  let parsed: HeadWitness;
  try {
    parsed = JSON.parse(text) as HeadWitness;
  } catch (error) {
    throw new WitnessError(`the head witness ${file} is not JSON: ${(error as Error).message}`);
  }
  if (parsed?.format !== 'recovery-ledger-head-witness' || parsed.version !== 1 || !Number.isInteger(parsed.position)) {
    throw new WitnessError(`${file} is not a recovery-ledger head witness`);
  }
  return parsed;
}

/**
 * Writes the witness so that a crash leaves the old one or the new one whole, never a torn file:
 * a temporary file beside it, fsync, rename over, fsync of the directory (the rename itself).
 */
export async function writeHeadWitness(
  file: string,
  head: LogHead,
  writtenAt: string,
  key?: string,
): Promise<HeadWitness> {
  const body: Omit<HeadWitness, 'signature'> = {
    format: 'recovery-ledger-head-witness',
    version: 1,
    written_at: writtenAt,
    ...head,
  };
  const witness: HeadWitness = key ? { ...body, signature: signWitness(key, body) } : body;
  const temporary = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  // Asynchronous: the fsyncs take milliseconds, which the service's requests must not wait for.
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(witness, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, file);
  try {
    const dir = await open(dirname(file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch {
    // Some file systems refuse to fsync a directory; the file itself is durable.
  }
  return witness;
}

/**
 * The log against the witness: a log that ends before the witness's head, or that holds another
 * event there, is an older copy (or a rewrite). A witness behind the log only lags.
 */
export async function checkAgainstWitness(
  store: EventStore,
  witness: HeadWitness,
  key?: string,
): Promise<{ head: LogHead; findings: WitnessFinding[] }> {
  const head = await currentHead(store);
  const findings: WitnessFinding[] = [];
  if (key !== undefined && !signatureHolds(key, witness)) {
    findings.push({
      kind: 'witness_signature_invalid',
      detail:
        'the head witness is not signed with the configured anchor key: it was written by someone without the key',
    });
  }
  const recorded = `the witness written at ${witness.written_at} records ${witness.events === undefined ? '' : `${witness.events} events up to `}position ${witness.position}`;
  const now = `the log holds ${head.events === undefined ? '' : `${head.events} events up to `}position ${head.position}`;
  if (
    head.position < witness.position ||
    (head.events !== undefined && witness.events !== undefined && head.events < witness.events)
  ) {
    findings.push({
      kind: 'log_behind_witness',
      detail: `${now}; ${recorded}: the log was rolled back to an older copy`,
    });
    return { head, findings };
  }
  if (witness.position > 0) {
    const there = await eventAt(store, witness.position);
    const expected = witness.last;
    const differs =
      !there ||
      !expected ||
      there.stream !== expected.stream ||
      there.revision !== expected.revision ||
      there.hash !== expected.hash;
    const rehashed = head.events !== undefined && head.events === witness.events && head.log_hash !== witness.log_hash;
    if (differs || rehashed) {
      findings.push({
        kind: 'witness_entry_differs',
        detail: `${recorded}, but the log holds another event there (${now}): the log was replaced by another copy or rewritten`,
      });
    }
  }
  return { head, findings };
}
