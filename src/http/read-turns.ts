/**
 * Turns for the reads of one operation that cost up to a few milliseconds each (a page of a long
 * stream, an evidence trail): one read per turn of the event loop, so that however many of them
 * arrive at once, every other request (another tenant's submit, `/health/live`) is served between
 * two of them rather than after all of them (docs/architecture.md, "Reading a stream").
 */
export class ReadTurns {
  private readonly waiting: Array<() => void> = [];
  private scheduled = false;

  /** Runs `read` on its own turn: after every read that asked before it, each on a turn of its own. */
  async run<T>(read: () => Promise<T>): Promise<T> {
    await new Promise<void>((resolve) => {
      this.waiting.push(resolve);
      this.schedule();
    });
    return read();
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.length === 0) return;
    this.scheduled = true;
    // setImmediate: the next read starts after the event loop has taken in what arrived meanwhile.
    setImmediate(() => {
      this.scheduled = false;
      this.waiting.shift()?.();
      this.schedule();
    });
  }
}

/** One queue for the process: the reads share the one thread that answers requests. */
export const READ_TURNS = new ReadTurns();
