import { createHmac, timingSafeEqual } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { canonicalJson } from '@recovery-ledger/core';
import {
  StoreIntegrityError,
  type EventStore,
  type LogAnchor,
  type StoredEvent,
  type StreamHead,
} from '../store/event-store.port';
import { anchorSignatureHolds, computeEventHash, GENESIS_HASH, nextLogHash } from './hash-chain';
import type { IntegrityFinding } from './log-audit';

/**
 * The last verified checkpoint (docs/reliability.md, "Start-up without a full pass"): the log as it
 * stood when it was last found whole, by a whole-log audit or by a check of what was appended after
 * an earlier checkpoint. It records the log's position, its event count and the log chain there
 * (src/integrity/hash-chain.ts, nextLogHash): that chain runs over every event's stream, revision and
 * hash in log order, so it fixes every stream's head hash as it stood at that position. It also
 * records the event at that position, which the log must still hold. Signed with HMAC-SHA256 under
 * LEDGER_ANCHOR_KEY where one is set, so a checkpoint moved forward over a forged tail is seen.
 *
 * Start-up checks only what follows it (`verifyTail`); the whole-log audit still runs, behind, for
 * what only the whole log shows (an edit in the middle of the verified part).
 */
export interface VerifiedCheckpoint {
  format: 'recovery-ledger-verified-checkpoint';
  version: 1;
  position: number;
  events: number;
  log_hash: string;
  /** The event at `position` (absent on an empty log). */
  last?: { stream: string; revision: number; hash: string };
  /** How the part up to `position` was verified: a whole pass, or the tail after an earlier checkpoint. */
  by: 'audit' | 'tail';
  verified_at: string;
  signature?: string;
}

export const VERIFIED_CHECKPOINT_FILE = 'verified-checkpoint.json';

export const verifiedCheckpointFile = (dataDir: string) => join(dataDir, VERIFIED_CHECKPOINT_FILE);

function signedText(checkpoint: Omit<VerifiedCheckpoint, 'signature'>): string {
  const { format, version, position, events, log_hash, last } = checkpoint;
  return canonicalJson({ format, version, position, events, log_hash, last: last ?? null });
}

export function signCheckpoint(key: string, checkpoint: Omit<VerifiedCheckpoint, 'signature'>): string {
  return createHmac('sha256', key).update(signedText(checkpoint)).digest('hex');
}

function signatureHolds(key: string, checkpoint: VerifiedCheckpoint): boolean {
  if (!checkpoint.signature || !/^[0-9a-f]{64}$/.test(checkpoint.signature)) return false;
  return timingSafeEqual(Buffer.from(signCheckpoint(key, checkpoint), 'hex'), Buffer.from(checkpoint.signature, 'hex'));
}

/** The checkpoint kept in `file`, or undefined where there is none or it does not parse (never trusted then). */
export function readVerifiedCheckpoint(file: string): VerifiedCheckpoint | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as Partial<VerifiedCheckpoint>;
    if (
      parsed.format !== 'recovery-ledger-verified-checkpoint' ||
      parsed.version !== 1 ||
      !Number.isSafeInteger(parsed.position) ||
      !Number.isSafeInteger(parsed.events) ||
      typeof parsed.log_hash !== 'string'
    )
      return undefined;
    return parsed as VerifiedCheckpoint;
  } catch {
    return undefined;
  }
}

/** Written to a temporary file, flushed, then renamed over the old one: a crash leaves one or the other. */
export function writeVerifiedCheckpoint(
  file: string,
  checkpoint: Omit<VerifiedCheckpoint, 'format' | 'version' | 'signature'>,
  anchorKey: string | undefined,
): VerifiedCheckpoint {
  const unsigned = { format: 'recovery-ledger-verified-checkpoint' as const, version: 1 as const, ...checkpoint };
  const written: VerifiedCheckpoint = anchorKey
    ? { ...unsigned, signature: signCheckpoint(anchorKey, unsigned) }
    : unsigned;
  const temporary = `${file}.${process.pid}.tmp`;
  mkdirSync(dirname(file), { recursive: true });
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(written, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  return written;
}

export interface TailCheck {
  ok: boolean;
  /** Events read and hashed: those after the checkpoint, and one before each stream they continue. */
  events_read: number;
  /** The log as verified now (the next checkpoint), when the check passed. */
  verified?: Omit<VerifiedCheckpoint, 'format' | 'version' | 'signature' | 'by' | 'verified_at'>;
  findings: IntegrityFinding[];
  broken_streams: string[];
}

export interface TailOptions {
  anchorKey?: string;
  /** A domain check of one event's shape: what is wrong with it, or undefined. */
  checkEvent?: (event: StoredEvent) => string | undefined;
  /** Called for every event read (a counter that proves how much a start read). */
  onRead?: (events: number) => void;
  /** A turn for the event loop between pages (the running service's periodic check). */
  pause?: () => Promise<void>;
  /**
   * Asked between pages: true ends the check where it stands, with what it found so far and no
   * verified result, so the checkpoint stays where it was (a stop that cannot wait for it).
   */
  stopped?: () => boolean;
}

const PAGE = 1_000;

/**
 * Verifies what was appended to the log after `checkpoint`, and that the log still holds what the
 * checkpoint recorded: the event at its position, a log chain from its hash that ends at the log
 * anchor, each appended event's own hash and its link to the stream's event before it, and each
 * stream it touched ending at its anchored head. A rollback below the checkpoint, a cut or forged
 * tail, or an edit of any event after it is a finding here, before the service answers anything; an
 * edit before it is left to the whole-log audit. Reads only; needs a store that keeps anchors.
 */
export async function verifyTail(
  store: EventStore,
  checkpoint: VerifiedCheckpoint,
  options: TailOptions = {},
): Promise<TailCheck> {
  const findings: IntegrityFinding[] = [];
  let eventsRead = 0;
  const read = (events: StoredEvent[]) => {
    eventsRead += events.length;
    options.onRead?.(events.length);
    return events;
  };
  const done = (verified?: TailCheck['verified']): TailCheck => ({
    ok: findings.length === 0,
    events_read: eventsRead,
    ...(findings.length === 0 && verified ? { verified } : {}),
    findings,
    broken_streams: [...new Set(findings.flatMap((finding) => (finding.stream ? [finding.stream] : [])))].sort(),
  });

  if (options.anchorKey !== undefined && !signatureHolds(options.anchorKey, checkpoint)) {
    findings.push({
      kind: 'checkpoint_mismatch',
      detail:
        'the verified checkpoint is not signed with the configured anchor key: it was written or moved by someone without the key',
    });
    return done();
  }
  const anchor: LogAnchor | undefined = await store.logAnchor();
  if (!anchor) {
    if (checkpoint.events > 0 || (await store.headPosition()) > 0)
      findings.push({ kind: 'log_anchor_missing', detail: 'the log has events but no anchor: the anchor was removed' });
    return done();
  }
  if (options.anchorKey !== undefined && !anchorSignatureHolds(options.anchorKey, anchor))
    findings.push({
      kind: 'anchor_signature_invalid',
      detail:
        'the log anchor is not signed with the configured anchor key: it was rewritten by someone without the key',
    });
  if (anchor.position < checkpoint.position || anchor.events < checkpoint.events) {
    findings.push({
      kind: 'log_anchor_mismatch',
      detail: `the log anchor records ${anchor.events} events up to position ${anchor.position}, fewer than the ${checkpoint.events} up to ${checkpoint.position} verified before: events were removed`,
    });
    return done();
  }
  if (checkpoint.last) {
    const [at] = read(await store.readAll({ after: checkpoint.position - 1, limit: 1 }).catch(() => []));
    if (
      !at ||
      at.position !== checkpoint.position ||
      at.stream !== checkpoint.last.stream ||
      at.revision !== checkpoint.last.revision ||
      at.metadata.hash !== checkpoint.last.hash
    ) {
      findings.push({
        kind: 'checkpoint_mismatch',
        stream: checkpoint.last.stream,
        revision: checkpoint.last.revision,
        detail: `the log no longer holds at position ${checkpoint.position} the event verified there: the log was rewritten, not only grown`,
      });
      return done();
    }
  }

  let logHash = checkpoint.log_hash;
  let events = checkpoint.events;
  let position = checkpoint.position;
  let last = checkpoint.last;
  /** Each stream the tail touches: its last event read, and whether a finding already named it. */
  const tails = new Map<string, { revision: number; hash: string; broken: boolean }>();
  const brokenAt = (event: StoredEvent, kind: IntegrityFinding['kind'], detail: string) => {
    findings.push({ kind, stream: event.stream, revision: event.revision, event_id: event.event_id, detail });
  };
  for (let after = checkpoint.position; after < anchor.position;) {
    let page: StoredEvent[];
    try {
      page = read(await store.readAll({ after, limit: PAGE }));
    } catch (error) {
      if (!(error instanceof StoreIntegrityError)) throw error;
      findings.push({
        kind: 'undecodable_row',
        stream: error.stream,
        position: error.position,
        detail: error.reason,
      });
      return done();
    }
    if (page.length === 0) break;
    for (const event of page) {
      if (event.position > anchor.position) break;
      let tail = tails.get(event.stream);
      if (!tail) {
        tail = { revision: -1, hash: GENESIS_HASH, broken: false };
        if (event.revision > 0) {
          // The stream's event before the tail: verified up to the checkpoint, re-hashed here so a
          // link to an edited event is not taken on trust.
          const [before] = read(
            await store.readStreamRange(event.stream, event.revision - 1, 1).catch(() => [] as StoredEvent[]),
          );
          if (
            before &&
            before.revision === event.revision - 1 &&
            before.position <= checkpoint.position &&
            computeEventHash(before) === before.metadata.hash
          )
            tail = { revision: before.revision, hash: String(before.metadata.hash), broken: false };
          else {
            tail.broken = true;
            brokenAt(
              event,
              'prev_hash_mismatch',
              'the stream event it follows is missing, moved or changed: an earlier event was replaced, removed or inserted',
            );
          }
        }
        tails.set(event.stream, tail);
      }
      if (!tail.broken) {
        if (event.revision !== tail.revision + 1) {
          tail.broken = true;
          brokenAt(event, 'revision_gap', 'its revision does not follow the one before it: an event is missing');
        } else if (event.metadata.prev_hash !== tail.hash) {
          tail.broken = true;
          brokenAt(
            event,
            'prev_hash_mismatch',
            'its prev_hash is not the hash of the event before it: an earlier event was replaced, removed or inserted',
          );
        } else if (computeEventHash(event) !== event.metadata.hash) {
          tail.broken = true;
          brokenAt(
            event,
            'hash_mismatch',
            'its content no longer hashes to its recorded hash: the event was changed after it was written',
          );
        } else {
          const problem = options.checkEvent?.(event);
          if (problem) {
            tail.broken = true;
            brokenAt(event, 'unexpected_shape', `not an event the ledger writes: ${problem}`);
          }
        }
      }
      tail.revision = event.revision;
      tail.hash = String(event.metadata.hash);
      logHash = nextLogHash(logHash, { stream: event.stream, revision: event.revision, hash: tail.hash });
      events += 1;
      position = event.position;
      last = { stream: event.stream, revision: event.revision, hash: tail.hash };
    }
    after = page[page.length - 1].position;
    await options.pause?.();
    if (options.stopped?.()) return done();
  }

  if (events !== anchor.events || logHash !== anchor.log_hash || position !== anchor.position)
    findings.push({
      kind: 'log_anchor_mismatch',
      detail: `the log anchor records ${anchor.events} events up to position ${anchor.position}; from the verified checkpoint the log now holds ${events} up to ${position}${logHash === anchor.log_hash ? '' : ', and its chain differs'}: events were removed, added or re-hashed outside the ledger`,
    });
  // Rows past the anchor: an append moves its stream's head and the anchor with its events, so each
  // one there is either appended since the anchor was read (its head covers it) or put there
  // outside the ledger.
  // A stream's head is asked once, and again only for an event it does not cover: on a store shared
  // with other processes (docs/postgres.md) every event past the anchor would otherwise be a round trip.
  const headsPastAnchor = new Map<string, StreamHead | undefined>();
  for (let after = anchor.position; ;) {
    const page = read(await store.readAll({ after, limit: PAGE }).catch(() => [] as StoredEvent[]));
    if (page.length === 0) break;
    for (const event of page) {
      let head = headsPastAnchor.get(event.stream);
      if (!head || head.position < event.position) {
        head = await store.anchoredHead(event.stream);
        headsPastAnchor.set(event.stream, head);
      }
      if (head && head.position >= event.position) continue;
      tails.delete(event.stream);
      brokenAt(
        event,
        'head_mismatch',
        "it stands in the log past its stream's anchored head: it was added outside the ledger",
      );
    }
    after = page[page.length - 1].position;
    if (options.stopped?.()) return done();
  }
  for (const [stream, tail] of tails) {
    if (tail.broken) continue;
    const head = await store.anchoredHead(stream);
    // Appended to since the anchor was read (another process on the same store): its own append checked it.
    if (head && head.position > anchor.position) continue;
    if (!head || head.revision !== tail.revision || head.hash !== tail.hash)
      findings.push({
        kind: 'head_mismatch',
        stream,
        revision: tail.revision,
        detail: !head
          ? 'the stream has events but no anchored head: it was added, or renamed here, outside the ledger'
          : head.revision > tail.revision
            ? `the stream ends at revision ${tail.revision} but its anchored head is revision ${head.revision}: its tail was cut`
            : `the stream's last event (revision ${tail.revision}) is not its anchored head (revision ${head.revision}): its tail was forged or re-hashed`,
      });
  }
  return done({ position, events, log_hash: logHash, ...(last ? { last } : {}) });
}
