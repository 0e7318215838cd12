import { once } from 'node:events';
import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { CliError } from '../cli-errors';
import { cloudEventLine } from '../cloudevents-format';
import { remoteLedger, withLocalStore, type GlobalOptions, type RemoteLedger } from '../ledger-source';
import { archiveCut, archiveLines, type ArchiveFooter } from '../../store/log-archive-format';
import { OPERATION_STREAM_PREFIX } from '../../store/stream-names';
import { counted } from '../text-format';

export interface ExportOptions {
  out?: string;
  /** `ndjson` (the archive `import` reads, the default) or `cloudevents` (src/cli/cloudevents-format.ts). */
  format?: 'ndjson' | 'cloudevents';
}

export interface Sink {
  write(text: string): Promise<void>;
  /** Makes the output final (a file is renamed into place only now). */
  commit(): Promise<void>;
  abandon(): void;
}

/**
 * A file is written beside its target and renamed at the end, so an interrupted export never
 * leaves something that looks like a complete one; without --out the lines go to stdout.
 */
export function openSink(out: string | undefined): Sink {
  if (out === undefined || out === '-') {
    return {
      write: async (text) => {
        if (!process.stdout.write(text)) await once(process.stdout, 'drain');
      },
      commit: async () => undefined,
      abandon: () => undefined,
    };
  }
  const partial = join(dirname(out), `.${basename(out)}.partial`);
  const stream = createWriteStream(partial, { encoding: 'utf8' });
  return {
    write: async (text) => {
      if (!stream.write(text)) await once(stream, 'drain');
    },
    commit: async () => {
      stream.end();
      await once(stream, 'finish');
      renameSync(partial, out);
    },
    abandon: () => {
      stream.destroy();
      rmSync(partial, { force: true });
    },
  };
}

/** Every operation's events, the archive written to the sink line by line (log-archive-format.ts). */
async function exportLocal(global: GlobalOptions, sink: Sink): Promise<Omit<ArchiveFooter, 'kind'>> {
  return withLocalStore(global, async ({ store }) => {
    const lines = archiveLines(store, await archiveCut(store), {
      streamPrefix: OPERATION_STREAM_PREFIX,
      exportedAt: new Date().toISOString(),
    });
    for (;;) {
      const next = await lines.next();
      if (next.done) return next.value;
      await sink.write(next.value);
    }
  });
}

/** The service's admin export (the key's tenant), passed through as it streams in. */
export async function exportRemote(remote: RemoteLedger, sink: Sink): Promise<Omit<ArchiveFooter, 'kind'>> {
  const response = await remote.send('GET', '/v1/admin/export');
  if (!response.ok || !response.body) throw await remote.failure(response);
  let tail = '';
  for await (const chunk of Readable.fromWeb(response.body as WebReadableStream<Uint8Array>)) {
    const text = Buffer.from(chunk as Uint8Array).toString('utf8');
    await sink.write(text);
    tail = (tail + text).slice(-4096);
  }
  const last = tail.trimEnd().split('\n').pop() ?? '';
  let footer: ArchiveFooter | undefined;
  try {
    footer = JSON.parse(last) as ArchiveFooter;
  } catch {
    footer = undefined;
  }
  // The footer is the service's "that was all": without it the connection was cut mid-export.
  if (footer?.kind !== 'footer')
    throw new CliError(`the export from ${remote.origin} ended without its footer: it was cut short`);
  return { events: footer.events, streams: footer.streams, last_position: footer.last_position };
}

/** A sink that writes each whole archive line as a CloudEvent (lines may arrive split across writes). */
function cloudEventsSink(inner: Sink): Sink {
  let pending = '';
  return {
    write: async (text) => {
      pending += text;
      const end = pending.lastIndexOf('\n');
      if (end < 0) return;
      const lines = pending
        .slice(0, end)
        .split('\n')
        .filter((line) => line.trim() !== '');
      pending = pending.slice(end + 1);
      const converted = lines.map(cloudEventLine).join('');
      if (converted) await inner.write(converted);
    },
    commit: () => inner.commit(),
    abandon: () => inner.abandon(),
  };
}

export async function exportCommand(global: GlobalOptions, options: ExportOptions): Promise<void> {
  const sink = options.format === 'cloudevents' ? cloudEventsSink(openSink(options.out)) : openSink(options.out);
  const remote = remoteLedger(global);
  let footer: Omit<ArchiveFooter, 'kind'>;
  try {
    footer = remote ? await exportRemote(remote, sink) : await exportLocal(global, sink);
    await sink.commit();
  } catch (error) {
    sink.abandon();
    throw error;
  }
  const toFile = options.out !== undefined && options.out !== '-';
  process.stderr.write(
    `exported ${counted(footer.events, 'event')} in ${counted(footer.streams, 'stream')}${toFile ? ` to ${options.out}` : ''}\n`,
  );
}
