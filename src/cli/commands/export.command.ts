import { once } from 'node:events';
import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { requireLocal, withLocalStore, type GlobalOptions } from '../ledger-source';
import { eventLine, footerLine, headerLine } from '../log-archive';
import { scanLog } from '../log-scan';

export interface ExportOptions {
  out?: string;
}

/**
 * Writes the log as NDJSON (format in ../log-archive.ts) up to the head position read at the start:
 * positions are assigned at commit, in order, so that is a consistent cut even while the service
 * keeps appending. A file is written beside its target and renamed at the end, so an interrupted
 * export never leaves something that looks like a complete one.
 */
export async function exportCommand(global: GlobalOptions, options: ExportOptions): Promise<void> {
  requireLocal(global, 'export');
  const toFile = options.out !== undefined && options.out !== '-';
  const partial = toFile ? join(dirname(options.out as string), `.${basename(options.out as string)}.partial`) : undefined;
  const out: NodeJS.WritableStream = partial ? createWriteStream(partial, { encoding: 'utf8' }) : process.stdout;
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, 'drain');
  };
  let events = 0;
  let lastPosition = 0;
  const streams = new Set<string>();
  try {
    await withLocalStore(global, async ({ store }) => {
      const head = await store.headPosition();
      await write(headerLine(new Date().toISOString(), head));
      await scanLog(
        store,
        async (page) => {
          for (const event of page) {
            await write(eventLine(event));
            streams.add(event.stream);
            lastPosition = event.position;
          }
          events += page.length;
        },
        { until: head },
      );
    });
    await write(footerLine({ events, streams: streams.size, last_position: lastPosition }));
    if (partial) {
      out.end();
      await once(out, 'finish');
      renameSync(partial, options.out as string);
    }
  } catch (error) {
    if (partial) {
      out.end();
      rmSync(partial, { force: true });
    }
    throw error;
  }
  process.stderr.write(`exported ${events} events in ${streams.size} streams${toFile ? ` to ${options.out}` : ''}\n`);
}
