import type { EventStore } from '../store/event-store.port';
import { currentHead, writeHeadWitness, type LogHead } from './head-witness';
import { onEmbeddedAppend } from '../adapters/store.factory';

export interface HeadWitnessWriterOptions {
  store: EventStore;
  file: string;
  /** At most one write per this many milliseconds while appends come in. */
  intervalMs: number;
  anchorKey?: string;
  now: () => Date;
  onError: (error: Error) => void;
}

/**
 * Keeps the head witness (src/integrity/head-witness.ts) up with the log: after commits, at most every
 * `intervalMs`, and once more at shutdown. The witness may lag the log by that much; a restore to a
 * copy newer than the witness is therefore not seen (docs/security.md, "A log rolled back").
 */
export class HeadWitnessWriter {
  private timer: NodeJS.Timeout | undefined;
  private poller: NodeJS.Timeout | undefined;
  private unsubscribe: () => void = () => undefined;
  private lastWriteMs = 0;
  private written: LogHead | undefined;
  private writing: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: HeadWitnessWriterOptions) {}

  /** Writes the head now (a witness behind the log is advanced), then follows the appends. */
  async start(): Promise<void> {
    await this.flush();
    this.unsubscribe = onEmbeddedAppend(this.options.store, () => this.schedule());
    // A store that tells this process nothing of its commits (EventStoreDB, other writers) is polled.
    this.poller = setInterval(() => this.schedule(), Math.max(this.options.intervalMs, 1000));
    this.poller.unref();
  }

  private schedule(): void {
    if (this.timer || this.stopped) return;
    const wait = Math.max(0, this.lastWriteMs + this.options.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, wait);
    this.timer.unref();
  }

  /** Writes the log's head if it moved since the last write; one write at a time. */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      try {
        const head = await currentHead(this.options.store);
        this.lastWriteMs = Date.now();
        if (this.written && this.written.position === head.position && this.written.log_hash === head.log_hash) return;
        await writeHeadWitness(this.options.file, head, this.options.now().toISOString(), this.options.anchorKey);
        this.written = head;
      } catch (error) {
        this.options.onError(error as Error);
      }
    });
    return this.writing;
  }

  /** The last write, before the store closes. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    if (this.timer) clearTimeout(this.timer);
    if (this.poller) clearInterval(this.poller);
    this.timer = undefined;
    await this.flush();
  }
}
