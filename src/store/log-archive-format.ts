import type { EventStore, LogAnchor, StoredEvent } from './event-store.port';

/**
 * The export format: NDJSON, one JSON object a line, so it streams, diffs, greps and `jq`s.
 *
 *   {"kind":"header","format":"recovery-ledger-log","version":1,"exported_at":…,"head_position":…}
 *   {"kind":"event","stream":…,"revision":…,"position":…,"event_id":…,"type":…,"data":…,"metadata":{…,"prev_hash":…,"hash":…}}
 *   …
 *   {"kind":"footer","events":N,"streams":M,"last_position":…,"heads":[…],"log_anchor":{…}}
 *
 * Events are in global log order. Each carries its hash chain (metadata.prev_hash, metadata.hash),
 * which covers everything but the global position, so an import can prove the file is the log it
 * was written from, and the footer's count proves the file was not cut short.
 */
export const ARCHIVE_FORMAT = 'recovery-ledger-log';
export const ARCHIVE_VERSION = 1;

export interface ArchiveHeader {
  kind: 'header';
  format: typeof ARCHIVE_FORMAT;
  version: number;
  exported_at: string;
  /** The last global position included: the export is the log up to here. */
  head_position: number;
}

export interface ArchiveFooter {
  kind: 'footer';
  events: number;
  streams: number;
  last_position: number;
  /**
   * The anchored head of every exported stream, as the store recorded it (absent from files written
   * before anchors, or by a store that keeps none): a file whose stream was cut or dropped no longer
   * meets its head. Offline, `recovery-ledger verify --archive` checks them.
   */
  heads?: Array<{ stream: string; revision: number; hash: string }>;
  /** The log anchor, when the file is the whole log up to it (a local export of the embedded store). */
  log_anchor?: { position: number; events: number; log_hash: string; signature?: string };
}

export interface Archive {
  header: ArchiveHeader;
  events: StoredEvent[];
  footer: ArchiveFooter;
}

export function headerLine(exportedAt: string, headPosition: number): string {
  const header: ArchiveHeader = {
    kind: 'header',
    format: ARCHIVE_FORMAT,
    version: ARCHIVE_VERSION,
    exported_at: exportedAt,
    head_position: headPosition,
  };
  return `${JSON.stringify(header)}\n`;
}

export function eventLine(event: StoredEvent): string {
  const { stream, revision, position, event_id, type, data, metadata } = event;
  return `${JSON.stringify({ kind: 'event', stream, revision, position, event_id, type, data, metadata })}\n`;
}

export function footerLine(footer: Omit<ArchiveFooter, 'kind'>): string {
  return `${JSON.stringify({ kind: 'footer', ...footer })}\n`;
}

const ARCHIVE_PAGE = 1000;

/**
 * Where an archive ends: the log anchor, or the head position read first. Positions are assigned at
 * commit, in order, so the log up to it is one consistent cut while appends continue. Read before
 * anything is sent, so a store that cannot answer is refused whole rather than cut short.
 */
export interface ArchiveCut {
  head: number;
  anchor?: LogAnchor;
}

export async function archiveCut(store: EventStore): Promise<ArchiveCut> {
  const anchor = await store.logAnchor();
  return { head: anchor?.position ?? (await store.headPosition()), anchor };
}

/**
 * The archive of the streams under `streamPrefix` up to the cut, line by line as it is read: the
 * CLI's local export (every operation) and the admin route (the key's tenant) write the same file.
 * The footer carries the heads and the anchor of the cut for an offline verifier, and is also the
 * generator's return value.
 */
export async function* archiveLines(
  store: EventStore,
  { head, anchor }: ArchiveCut,
  { streamPrefix, exportedAt }: { streamPrefix: string; exportedAt: string },
): AsyncGenerator<string, Omit<ArchiveFooter, 'kind'>> {
  yield headerLine(exportedAt, head);
  const streams = new Set<string>();
  let events = 0;
  let lastPosition = 0;
  for (let after = 0; after < head;) {
    const page = (await store.readAll({ after, limit: ARCHIVE_PAGE, streamPrefix })).filter(
      (event) => event.position <= head,
    );
    if (page.length === 0) break;
    for (const event of page) {
      streams.add(event.stream);
      lastPosition = event.position;
      yield eventLine(event);
    }
    events += page.length;
    after = page[page.length - 1].position;
  }
  const heads = store.keepsAnchors
    ? (await store.anchoredHeads(streamPrefix)).filter((each) => each.position <= head)
    : undefined;
  const footer = {
    events,
    streams: streams.size,
    last_position: lastPosition,
    ...(heads ? { heads: heads.map(({ stream, revision, hash }) => ({ stream, revision, hash })) } : {}),
    // Only when these events are the whole log: the anchor then tells of nothing left out.
    ...(anchor && anchor.events === events ? { log_anchor: anchor } : {}),
  };
  yield footerLine(footer);
  return footer;
}
