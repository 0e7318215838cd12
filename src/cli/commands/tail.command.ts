import type { StoredEvent } from '../../store/event-store.port';
import { OPERATION_STREAM_PREFIX, parseOperationStream } from '../../store/stream-names';
import { requireLocal, withLocalStore, type GlobalOptions } from '../ledger-source';
import { eventLine } from '../../store/log-archive-format';
import { scanLog } from '../log-scan';
import { describeEvent } from '../operation-timeline';

export interface TailOptions {
  /** Exclusive global position to start after; default: the head, so only new events show. */
  from?: number;
  json?: boolean;
  follow: boolean;
}

export function tailLine(event: StoredEvent): string {
  const operation = parseOperationStream(event.stream);
  const where = operation ? `${operation.tenant} ${operation.operationRef}` : event.stream;
  return `${event.position}  ${event.metadata.recorded_at}  ${where}  r${event.revision}  ${event.type}  ${describeEvent(event.type, event.data)}\n`;
}

/**
 * Follows the global log like `tail -f`: the store's own subscription, which polls the file for
 * events another process (the service) commits. Ends cleanly on Ctrl-C or SIGTERM.
 */
export async function tailCommand(global: GlobalOptions, options: TailOptions): Promise<void> {
  requireLocal(global, 'tail');
  await withLocalStore(global, async ({ store }) => {
    const after = options.from ?? (await store.headPosition());
    const print = (events: StoredEvent[]) => {
      for (const event of events) process.stdout.write(options.json ? eventLine(event) : tailLine(event));
    };
    if (!options.follow) {
      await scanLog(store, print, { after });
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const subscription = store.subscribe(
        { after, streamPrefix: OPERATION_STREAM_PREFIX },
        { onEvents: print, onError: reject },
      );
      const stop = () => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        subscription.close().then(resolve, reject);
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
      process.stderr.write(`following the log after position ${after} (Ctrl-C to stop)\n`);
    });
  });
}
