import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { isJsonObject } from '@recovery-ledger/core';
import type { StoredEvent } from '../store/event-store.port';
import { isEventMetadata } from '../store/event-metadata';
import {
  ARCHIVE_FORMAT,
  ARCHIVE_VERSION,
  type Archive,
  type ArchiveFooter,
  type ArchiveHeader,
} from '../store/log-archive-format';
import { CliError } from './cli-errors';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isString = (value: unknown): value is string => typeof value === 'string';
const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);
const optional = (value: unknown, holds: (value: unknown) => boolean) => value === undefined || holds(value);

const isHead = (value: unknown) =>
  isObject(value) && isString(value.stream) && isInteger(value.revision) && isString(value.hash);
const isLogAnchor = (value: unknown) =>
  isObject(value) &&
  isInteger(value.position) &&
  isInteger(value.events) &&
  isString(value.log_hash) &&
  optional(value.signature, isString);

function isArchiveHeader(value: Record<string, unknown>): value is Record<string, unknown> & ArchiveHeader {
  return (
    value.kind === 'header' &&
    value.format === ARCHIVE_FORMAT &&
    isInteger(value.version) &&
    isString(value.exported_at) &&
    isInteger(value.head_position)
  );
}

/** Heads and the log anchor are optional: files written before anchors, or by a store that keeps none, lack them. */
function isArchiveFooter(value: Record<string, unknown>): value is Record<string, unknown> & ArchiveFooter {
  return (
    value.kind === 'footer' &&
    isInteger(value.events) &&
    isInteger(value.streams) &&
    isInteger(value.last_position) &&
    optional(value.heads, (heads) => Array.isArray(heads) && heads.every(isHead)) &&
    optional(value.log_anchor, isLogAnchor)
  );
}

function checkEvent(value: Record<string, unknown>, at: string): StoredEvent {
  const { stream, revision, position, event_id, type, data, metadata } = value;
  if (
    isString(stream) &&
    isInteger(revision) &&
    isInteger(position) &&
    isString(event_id) &&
    isString(type) &&
    isJsonObject(data) &&
    isEventMetadata(metadata)
  ) {
    return { stream, revision, position, event_id, type, data, metadata };
  }
  throw new CliError(
    `${at}: not an event of this format (stream, revision, position, event_id, type, data, metadata with hashes)`,
  );
}

/** Reads and checks the file's framing (header, events, footer, counts); chains are checked by the caller. */
export async function readArchive(file: string): Promise<Archive> {
  const input = file === '-' ? process.stdin : createReadStream(file, { encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Infinity });
  let header: ArchiveHeader | undefined;
  let footer: ArchiveFooter | undefined;
  const events: StoredEvent[] = [];
  let lineNumber = 0;
  try {
    for await (const line of lines) {
      lineNumber += 1;
      if (line.trim() === '') continue;
      const at = `${file === '-' ? 'stdin' : file}:${lineNumber}`;
      if (footer) throw new CliError(`${at}: content after the footer`);
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new CliError(`${at}: not JSON`);
      }
      if (!isObject(value)) throw new CliError(`${at}: not a JSON object`);
      if (!header) {
        if (value.kind !== 'header' || value.format !== ARCHIVE_FORMAT)
          throw new CliError(`${at}: not a ${ARCHIVE_FORMAT} file (no header)`);
        if (value.version !== ARCHIVE_VERSION)
          throw new CliError(`${at}: format version ${String(value.version)} is not ${ARCHIVE_VERSION}`);
        if (!isArchiveHeader(value))
          throw new CliError(`${at}: not a header of this format (exported_at, head_position)`);
        header = value;
      } else if (value.kind === 'event') {
        const event = checkEvent(value, at);
        const previous = events[events.length - 1];
        if (previous && event.position <= previous.position)
          throw new CliError(`${at}: positions are not in log order`);
        events.push(event);
      } else if (value.kind === 'footer') {
        if (!isArchiveFooter(value))
          throw new CliError(`${at}: not a footer of this format (events, streams, last_position, heads, log_anchor)`);
        footer = value;
      } else {
        throw new CliError(`${at}: unknown line kind ${JSON.stringify(value.kind)}`);
      }
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new CliError(`no such file: ${file}`);
    throw error;
  }
  if (!header) throw new CliError(`${file}: empty, not a ${ARCHIVE_FORMAT} file`);
  if (!footer) throw new CliError(`${file}: no footer; the file was cut short (${events.length} events read)`);
  if (footer.events !== events.length) {
    throw new CliError(`${file}: the footer counts ${footer.events} events, the file holds ${events.length}`);
  }
  const streams = new Set(events.map((event) => event.stream)).size;
  if (footer.streams !== streams)
    throw new CliError(`${file}: the footer counts ${footer.streams} streams, the file holds ${streams}`);
  return { header, events, footer };
}
