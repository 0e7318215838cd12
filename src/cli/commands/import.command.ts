import { fold } from '@recovery-ledger/core';
import { stepIndexEntry } from '../../ledger/step-index';
import { toRecorded } from '../../ledger/stored-events';
import type { EventStore, NewEvent, StoredEvent } from '../../store/event-store.port';
import { OPERATION_STREAM_PREFIX } from '../../store/stream-names';
import { CliError } from '../cli-errors';
import { requireLocal, withLocalStore, type GlobalOptions } from '../ledger-source';
import { readArchive } from '../log-archive';
import { auditLog } from '../../integrity/log-audit';
import { scanLog } from '../log-scan';
import { counted } from '../text-format';
import { auditEvents, describeFinding } from './verify.command';
import { ledgerEventProblem } from '../../integrity/integrity-monitor';

export interface ImportSummary {
  events: number;
  streams: number;
  appended: number;
  already_present: number;
}

function byStream(events: readonly StoredEvent[]): Map<string, StoredEvent[]> {
  const streams = new Map<string, StoredEvent[]>();
  for (const event of events) {
    const list = streams.get(event.stream);
    if (list) list.push(event);
    else streams.set(event.stream, [event]);
  }
  return streams;
}

/**
 * What the target already holds must be the start of what the file holds, stream by stream (same
 * hashes, so the same events): that makes an import into an empty store, a second run of the same
 * import, and the resumption of an interrupted one the same operation. Anything else is refused
 * before a single event is written.
 */
async function alreadyPresent(store: EventStore, file: Map<string, StoredEvent[]>): Promise<Map<string, number>> {
  const present = new Map<string, number>();
  await scanLog(store, (page) => {
    for (const event of page) {
      const expected = file.get(event.stream)?.[event.revision];
      if (!expected) {
        throw new CliError(
          `the target store is not empty: it holds ${event.stream} revision ${event.revision}, which the file does not; import loads into an empty store`,
        );
      }
      if (expected.metadata.hash !== event.metadata.hash) {
        throw new CliError(
          `the target store holds a different ${event.stream} revision ${event.revision} (event ${event.event_id}) than the file`,
        );
      }
      present.set(event.stream, Math.max(present.get(event.stream) ?? 0, event.revision + 1));
    }
  });
  return present;
}

const asNew = ({ event_id, type, data, metadata }: StoredEvent): NewEvent => ({ event_id, type, data, metadata });

export async function importCommand(global: GlobalOptions, file: string): Promise<ImportSummary> {
  requireLocal(global, 'import');
  const archive = await readArchive(file);
  const streams = byStream(archive.events);
  for (const stream of streams.keys()) {
    if (!stream.startsWith(OPERATION_STREAM_PREFIX))
      throw new CliError(`${file}: ${stream} is not a ledger operation stream`);
  }
  // Checked before anything is written: a tampered file (a chain, a head, the anchor, an event of a
  // shape the ledger never writes) is refused whole.
  const checked = auditEvents(archive.events, archive.footer);
  if (!checked.ok) throw new CliError(`${file}: ${describeFinding(checked.findings[0])}; nothing was imported`);
  for (const event of archive.events) {
    const problem = ledgerEventProblem(event);
    if (problem)
      throw new CliError(
        `${file}: event ${event.event_id} is not an event the ledger writes (${problem}); nothing was imported`,
      );
  }
  const summary = await withLocalStore(
    global,
    async ({ store, config }) => {
      const present = await alreadyPresent(store, streams);
      // The embedded store commits queued appends in arrival order (group commit), so a window of
      // appends keeps the file's global order at one fsync per window; another adapter gets one
      // append at a time, which keeps the order without relying on that.
      const window = config.store === 'sqlite' ? 256 : 1;
      let pending: Promise<unknown>[] = [];
      let appended = 0;
      let run: StoredEvent[] = [];
      const flushRun = () => {
        if (run.length === 0) return;
        const first = run[0];
        const last = run[run.length - 1];
        // Filed in the index as the ledger files it, so /v1/recovery lists what the file holds in doubt.
        const index = stepIndexEntry(
          fold((streams.get(first.stream) as StoredEvent[]).slice(0, last.revision + 1).map(toRecorded)),
        );
        pending.push(store.append(first.stream, first.revision - 1, run.map(asNew), index ? { index } : {}));
        appended += run.length;
        run = [];
      };
      for (const event of archive.events) {
        if (event.revision < (present.get(event.stream) ?? 0)) continue;
        if (run.length > 0 && run[0].stream !== event.stream) flushRun();
        run.push(event);
        if (pending.length >= window) {
          await Promise.all(pending);
          pending = [];
        }
      }
      flushRun();
      await Promise.all(pending);

      // The counts and chains of what is now stored, against the file.
      const audit = await auditLog(store, { anchorKey: config.anchorKey });
      if (!audit.ok) throw new CliError(`after the import: ${describeFinding(audit.findings[0])}`);
      if (audit.events !== archive.events.length || audit.streams.length !== streams.size) {
        throw new CliError(
          `after the import the store holds ${audit.events} events in ${audit.streams.length} streams, the file ${archive.events.length} in ${streams.size}`,
        );
      }
      for (const stream of audit.streams) {
        const events = streams.get(stream.stream) as StoredEvent[];
        if (events[events.length - 1].metadata.hash !== stream.last_hash) {
          throw new CliError(`after the import ${stream.stream} does not end with the file's last event`);
        }
      }
      return {
        events: audit.events,
        streams: audit.streams.length,
        appended,
        already_present: archive.events.length - appended,
      };
    },
    { create: true },
  );
  process.stdout.write(
    `imported ${counted(summary.appended, 'event')} (${summary.already_present} already present); the store holds ${counted(summary.events, 'event')} in ${counted(summary.streams, 'stream')}, counts and hash chains match the file\n`,
  );
  return summary;
}
