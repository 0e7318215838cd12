import {
  StoreIntegrityError,
  type EventStore,
  type LogAnchor,
  type StoredEvent,
  type StreamHead,
} from '../store/event-store.port';
import { anchorSignatureHolds, GENESIS_HASH, nextLogHash, verifyChain, type ChainBreak } from './hash-chain';
import { headPages, PagedCursor, StreamNameSpill } from './stream-pages';

/**
 * The whole-log audit behind `recovery-ledger verify`, the admin verify endpoint and the service's
 * start-up check (docs/reliability.md, "A log whose every loss is detectable"). It never stops at
 * the first fault: every stream is checked and every fault reported.
 *
 * What it checks, and what each check catches:
 * - each stream's hash chain from revision 0 (an edit, a removal from the middle, a reorder);
 * - revision order against log order within a stream (positions swapped);
 * - each row decodes, and (given `checkEvent`) has the shape the ledger writes (a forged row);
 * - each stream's last event against its anchored head (a cut tail, a forged tail, a re-hashed suffix);
 * - anchored heads with no stream (a stream deleted, or renamed away);
 * - the log chain over every event in log order against the log anchor, and the anchor's signature
 *   when a key is given (a deletion or re-hash that also rewrote the heads).
 */
export type FindingKind =
  | ChainBreak['reason']
  | 'undecodable_row'
  | 'unreadable_stream'
  | 'unexpected_shape'
  | 'head_mismatch'
  | 'missing_head'
  | 'stream_deleted'
  | 'log_anchor_mismatch'
  | 'log_anchor_missing'
  | 'anchor_signature_invalid'
  | 'checkpoint_mismatch';

export interface IntegrityFinding {
  kind: FindingKind;
  /** Absent when the finding is about the log as a whole. */
  stream?: string;
  revision?: number;
  position?: number;
  event_id?: string;
  detail: string;
}

export interface StreamAudit {
  stream: string;
  events: number;
  /** The hash of the stream's last event: what the next append must chain from. */
  last_hash: string;
}

export interface LogAudit {
  ok: boolean;
  events: number;
  /** Each stream audited, in name order; empty when asked not to keep them (`keepStreams: false`). */
  streams: StreamAudit[];
  /** How many streams were audited. */
  stream_count: number;
  /** Whether the store keeps anchors; without them a cut tail or a deleted stream cannot be seen. */
  anchored: boolean;
  /** The anchor recomputed from the log as it stands now (what a checkpoint records). */
  recomputed: { position: number; events: number; log_hash: string };
  findings: IntegrityFinding[];
  /** Streams with at least one finding, each once. */
  broken_streams: string[];
}

/** A checkpoint exported earlier: the log anchor and the stream heads as they stood then. */
export interface LogCheckpoint {
  format: 'recovery-ledger-checkpoint';
  version: 1;
  taken_at: string;
  anchor: { position: number; events: number; log_hash: string; signature?: string };
  heads: Array<Pick<StreamHead, 'stream' | 'revision' | 'hash'>>;
}

export interface AuditOptions {
  /** Only streams under this prefix are audited stream by stream; the log chain always covers all. */
  streamPrefix?: string;
  /** The key the log anchor is signed with; when given, an unsigned or badly signed anchor is a finding. */
  anchorKey?: string;
  /** A domain check of one event's shape: what is wrong with it, or undefined. */
  checkEvent?: (event: StoredEvent) => string | undefined;
  /** An earlier checkpoint: the log must have only grown since. */
  since?: LogCheckpoint;
  onStream?: (audit: StreamAudit) => void;
  /**
   * Keep every stream's audit in the answer (default true: `recovery-ledger verify` prints them and
   * a checkpoint is taken from them). The service's audit behind it keeps none, so its memory does
   * not grow with the number of streams (docs/scaling.md, "Memory").
   */
  keepStreams?: boolean;
  /**
   * The rest between pages: a turn for the event loop by default; the service's audit behind it
   * passes a pace that holds a bounded share of a core (src/integrity/cpu-share.ts).
   */
  pause?: () => Promise<void>;
}

const PAGE = 500;
/**
 * How many events the audit hashes between two turns of the event loop: at a few microseconds per
 * event, a read served meanwhile waits about a millisecond, not the tens a larger batch of streams cost.
 */
const YIELD_EVERY_EVENTS = 250;

/**
 * A store that answers synchronously (SQLite) settles its promises as microtasks: a long audit would
 * hold the event loop the whole time. Between pages the audit gives the loop a turn, so a service
 * auditing a long log at start still answers.
 */
export const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

const explain: Record<ChainBreak['reason'], string> = {
  hash_mismatch: 'its content no longer hashes to its recorded hash: the event was changed after it was written',
  prev_hash_mismatch:
    'its prev_hash is not the hash of the event before it: an earlier event was replaced, removed or inserted',
  revision_gap: 'its revision does not follow the one before it: an event is missing',
  position_order: 'it stands in the log before an earlier event of its stream: events were moved',
};

interface LogPass {
  events: number;
  position: number;
  logHash: string;
  /** The log chain after the checkpoint's count of events, if one was given. */
  hashAtCheckpoint?: string;
  /** The names of the streams under the audited prefix, out of the heap. */
  streams: StreamNameSpill;
  prefix: string;
  undecodable: IntegrityFinding[];
}

/** One pass over the whole log in order: the log chain, the stream names, the rows that do not decode. */
async function passOverLog(
  store: EventStore,
  prefix: string,
  checkpointEvents: number | undefined,
  until: number,
  pause: () => Promise<void>,
): Promise<LogPass> {
  const pass: LogPass = {
    events: 0,
    position: 0,
    logHash: GENESIS_HASH,
    streams: new StreamNameSpill(),
    prefix,
    undecodable: [],
  };
  try {
    return await passOver(store, pass, checkpointEvents, until, pause);
  } catch (error) {
    pass.streams.close();
    throw error;
  }
}

function seen(pass: LogPass, stream: string): void {
  if (stream.startsWith(pass.prefix)) pass.streams.add(stream);
}

async function passOver(
  store: EventStore,
  pass: LogPass,
  checkpointEvents: number | undefined,
  until: number,
  pause: () => Promise<void>,
): Promise<LogPass> {
  let after = 0;
  for (;;) {
    let page: StoredEvent[];
    try {
      page = await store.readAll({ after, limit: PAGE });
    } catch (error) {
      if (!(error instanceof StoreIntegrityError) || error.position === undefined) throw error;
      // Read up to the bad row, note it, and go on past it: one bad row must not hide the rest.
      page = error.position - 1 > after ? await readUpTo(store, after, error.position - 1) : [];
      pass.undecodable.push({
        kind: 'undecodable_row',
        stream: error.stream,
        position: error.position,
        detail: error.reason,
      });
      if (error.stream) seen(pass, error.stream);
      for (const event of page) {
        if (event.position <= until) fold(pass, event, checkpointEvents);
        else seen(pass, event.stream);
      }
      if (error.position <= until) {
        pass.events += 1;
        pass.position = error.position;
        // The row's hash cannot be read, so the log chain cannot be recomputed past it.
        pass.logHash = 'unreadable';
      }
      after = error.position;
      continue;
    }
    await pause();
    for (const event of page) {
      // Past the anchor only the stream names count: their streams are audited against their heads.
      if (event.position <= until) fold(pass, event, checkpointEvents);
      else seen(pass, event.stream);
    }
    if (page.length < PAGE) return pass;
    after = page[page.length - 1].position;
  }
}

/** The rows between `after` and a bad row, one at a time (a page read would meet the bad row again). */
async function readUpTo(store: EventStore, after: number, until: number): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  for (let from = after; from < until;) {
    let next: StoredEvent[];
    try {
      next = await store.readAll({ after: from, limit: 1 });
    } catch (error) {
      if (error instanceof StoreIntegrityError && error.position !== undefined && error.position > until) break;
      throw error;
    }
    if (next.length === 0 || next[0].position > until) break;
    events.push(next[0]);
    from = next[0].position;
  }
  return events;
}

function fold(pass: LogPass, event: StoredEvent, checkpointEvents: number | undefined): void {
  seen(pass, event.stream);
  if (pass.logHash !== 'unreadable') {
    pass.logHash = nextLogHash(pass.logHash, {
      stream: event.stream,
      revision: event.revision,
      hash: String(event.metadata.hash),
    });
  }
  pass.events += 1;
  pass.position = event.position;
  if (checkpointEvents !== undefined && pass.events === checkpointEvents) pass.hashAtCheckpoint = pass.logHash;
}

export async function auditLog(store: EventStore, options: AuditOptions = {}): Promise<LogAudit> {
  const prefix = options.streamPrefix ?? '';
  const findings: IntegrityFinding[] = [];
  // The anchor first: the pass stops at its position, so appends made while the audit runs (by this
  // process or another on the same store) are neither missed by the anchor nor counted against it.
  const anchor = store.keepsAnchors ? await store.logAnchor() : undefined;
  const until = anchor?.position ?? (store.keepsAnchors ? 0 : Number.MAX_SAFE_INTEGER);
  const anchorPosition = anchor?.position ?? 0;
  const pause = options.pause ?? yieldToEventLoop;
  const pass = await passOverLog(
    store,
    prefix,
    options.since?.anchor.events,
    store.keepsAnchors && !anchor ? Number.MAX_SAFE_INTEGER : until,
    pause,
  );
  findings.push(...pass.undecodable.filter((finding) => (finding.stream ?? '').startsWith(prefix)));
  // The stream names met in the pass and the anchored heads, both in name order, merged a page at
  // a time: neither is ever held whole.
  const names = new PagedCursor(pass.streams.pages());
  const heads = new PagedCursor(headPages(store, prefix));
  const keepStreams = options.keepStreams ?? true;
  const deleted: IntegrityFinding[] = [];
  const headless = async (head: StreamHead) => {
    // A stream first appended after the pass read the log has a head and events now: not deleted.
    if (head.position > anchorPosition && (await store.readStream(head.stream).catch(() => [])).length > 0) return;
    deleted.push({
      kind: 'stream_deleted',
      stream: head.stream,
      revision: head.revision,
      detail: `the stream is anchored at revision ${head.revision} but has no events: it was deleted or renamed`,
    });
  };

  const sinceHeads = new Map((options.since?.heads ?? []).map((head) => [head.stream, head]));
  const streams: StreamAudit[] = [];
  let streamCount = 0;
  let events = 0;
  // Events hashed since the event loop last had a turn: a reader waits for at most this many.
  let sinceYield = 0;
  try {
    for (let stream = await names.take(); stream !== undefined; stream = await names.take()) {
      if (sinceYield >= YIELD_EVERY_EVENTS) {
        await pause();
        sinceYield = 0;
      }
      for (let next = await heads.peek(); next && byteOrder(next.stream, stream) < 0; next = await heads.peek()) {
        await heads.take();
        await headless(next);
        sinceYield += 1;
      }
      const anchored = (await heads.peek())?.stream === stream ? await heads.take() : undefined;
      let stored: StoredEvent[];
      try {
        stored = await store.readStream(stream);
      } catch (error) {
        if (!(error instanceof StoreIntegrityError)) throw error;
        // A row that does not decode was reported by the pass over the log; anything else the store
        // refuses to read (a deleted or truncated stream on EventStoreDB) is reported here.
        if (!findings.some((finding) => finding.kind === 'undecodable_row' && finding.stream === stream)) {
          findings.push({
            kind: 'unreadable_stream',
            stream,
            detail: `the store refuses to read the stream: ${error.reason}`,
          });
        }
        continue;
      }
      events += stored.length;
      sinceYield += stored.length + 1;
      const last = stored[stored.length - 1];
      const audit: StreamAudit = { stream, events: stored.length, last_hash: last ? String(last.metadata.hash) : '' };
      streamCount += 1;
      if (keepStreams) streams.push(audit);
      options.onStream?.(audit);
      const found = verifyChain(stored);
      if (found)
        findings.push({
          kind: found.reason,
          stream,
          revision: found.revision,
          event_id: found.event_id,
          detail: explain[found.reason],
        });
      if (options.checkEvent) {
        for (const event of stored) {
          const problem = options.checkEvent(event);
          if (problem)
            findings.push({
              kind: 'unexpected_shape',
              stream,
              revision: event.revision,
              event_id: event.event_id,
              detail: `not an event the ledger writes: ${problem}`,
            });
        }
      }
      const earlier = sinceHeads.get(stream);
      if (earlier && stored[earlier.revision]?.metadata.hash !== earlier.hash) {
        findings.push({
          kind: 'checkpoint_mismatch',
          stream,
          revision: earlier.revision,
          detail: `revision ${earlier.revision} is not the event the checkpoint recorded there: the stream was rewritten, not only grown`,
        });
      }
      if (store.keepsAnchors) {
        let head = anchored;
        if (!head || !last || last.revision !== head.revision || last.metadata.hash !== head.hash) {
          // Maybe appended to since the heads were read: the append moves the head with the events.
          // A stream that no longer reads is judged on the events read above, against its head now;
          // a head that cannot be read at all is a failed audit, not a missing head.
          const reread = await store.readStreamAnchored(stream).catch(async (error: unknown) => {
            if (!(error instanceof StoreIntegrityError)) throw error;
            return { events: stored, head: await store.anchoredHead(stream) };
          });
          head = reread.head;
          const now = reread.events;
          const lastNow = now[now.length - 1];
          if (
            head &&
            lastNow &&
            lastNow.revision === head.revision &&
            lastNow.metadata.hash === head.hash &&
            lastNow.revision > (last?.revision ?? -1) &&
            !verifyChain(now)
          )
            continue;
        }
        if (!head) {
          findings.push({
            kind: 'missing_head',
            stream,
            detail: 'the stream has events but no anchored head: it was added, or renamed here, outside the ledger',
          });
        } else if (!last || last.revision !== head.revision || last.metadata.hash !== head.hash) {
          const cut = last && last.revision < head.revision;
          findings.push({
            kind: 'head_mismatch',
            stream,
            revision: last?.revision,
            detail: cut
              ? `the stream ends at revision ${last.revision} but its anchored head is revision ${head.revision}: its tail was cut`
              : `the stream's last event (revision ${last?.revision}) is not its anchored head (revision ${head.revision}): its tail was forged or re-hashed`,
          });
        }
      }
    }
    for (let head = await heads.take(); head !== undefined; head = await heads.take()) await headless(head);
  } finally {
    pass.streams.close();
  }
  findings.push(...deleted);

  const recomputed = { position: pass.position, events: pass.events, log_hash: pass.logHash };
  if (store.keepsAnchors) findings.push(...(await checkLogAnchor(anchor, recomputed, options.anchorKey)));
  if (options.since) findings.push(...checkSince(options.since, pass, streams, findings));

  const broken = new Set(findings.flatMap((finding) => (finding.stream ? [finding.stream] : [])));
  return {
    ok: findings.length === 0,
    events,
    streams,
    stream_count: streamCount,
    anchored: store.keepsAnchors,
    recomputed,
    findings,
    broken_streams: [...broken].sort(),
  };
}

/** Bytewise order of two names (SQLite's BINARY collation, which both sides of the merge are read in). */
function byteOrder(a: string, b: string): number {
  return a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function checkLogAnchor(
  anchor: LogAnchor | undefined,
  recomputed: { position: number; events: number; log_hash: string },
  anchorKey: string | undefined,
): IntegrityFinding[] {
  if (!anchor) {
    return recomputed.events === 0
      ? []
      : [{ kind: 'log_anchor_missing', detail: 'the log has events but no anchor: the anchor was removed' }];
  }
  const findings: IntegrityFinding[] = [];
  if (
    anchor.events !== recomputed.events ||
    anchor.log_hash !== recomputed.log_hash ||
    anchor.position !== recomputed.position
  ) {
    findings.push({
      kind: 'log_anchor_mismatch',
      detail: `the log anchor records ${anchor.events} events up to position ${anchor.position}; the log now holds ${recomputed.events} up to ${recomputed.position}${anchor.log_hash === recomputed.log_hash ? '' : ', and its chain differs'}: events were removed, added or re-hashed outside the ledger`,
    });
  }
  if (anchorKey !== undefined && !anchorSignatureHolds(anchorKey, anchor)) {
    findings.push({
      kind: 'anchor_signature_invalid',
      detail:
        'the log anchor is not signed with the configured anchor key: it was rewritten by someone without the key',
    });
  }
  return findings;
}

/** The log only grew since the checkpoint: the same first events in the same order, every head still there. */
function checkSince(
  since: LogCheckpoint,
  pass: LogPass,
  streams: StreamAudit[],
  findings: IntegrityFinding[],
): IntegrityFinding[] {
  const out: IntegrityFinding[] = [];
  if (pass.events < since.anchor.events || pass.hashAtCheckpoint !== since.anchor.log_hash) {
    out.push({
      kind: 'checkpoint_mismatch',
      detail: `the first ${since.anchor.events} events of the log are not the ones the checkpoint of ${since.taken_at} recorded: the log was rewritten, not only grown`,
    });
  }
  const known = new Set(streams.map((audit) => audit.stream));
  const broken = new Set(findings.flatMap((finding) => (finding.stream ? [finding.stream] : [])));
  for (const head of since.heads) {
    if (!known.has(head.stream) && !broken.has(head.stream)) {
      out.push({
        kind: 'checkpoint_mismatch',
        stream: head.stream,
        revision: head.revision,
        detail: `the stream stood at revision ${head.revision} at the checkpoint and is gone now`,
      });
    }
  }
  return out;
}

/** The checkpoint of a log as it stands: keep it outside the store to prove later that the log only grew. */
export async function takeCheckpoint(store: EventStore, audit: LogAudit, takenAt: string): Promise<LogCheckpoint> {
  const anchor = (await store.logAnchor()) ?? audit.recomputed;
  const heads = store.keepsAnchors
    ? (await store.anchoredHeads('')).map(({ stream, revision, hash }) => ({ stream, revision, hash }))
    : audit.streams.map((stream) => ({ stream: stream.stream, revision: stream.events - 1, hash: stream.last_hash }));
  return { format: 'recovery-ledger-checkpoint', version: 1, taken_at: takenAt, anchor, heads };
}
