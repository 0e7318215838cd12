import type { StoredEvent } from './event-store.port';

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
