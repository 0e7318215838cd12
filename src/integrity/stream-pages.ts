import Database from 'better-sqlite3';
import type { EventStore, StreamHead } from '../store/event-store.port';

/** Names read back, and heads read from the store, per page: what the audit holds at a time. */
export const STREAM_PAGE = 1000;

/**
 * The stream names one pass over the log met, kept out of the heap: in a private temporary SQLite
 * database (deleted when closed; SQLite keeps at most its page cache of it in memory and spills the
 * rest to a temporary file), read back in name order a page at a time. A log of 10 M events holds
 * millions of streams; a Set of their names was the audit's memory growing with the log
 * (docs/scaling.md, "Memory").
 */
export class StreamNameSpill {
  private readonly db = new Database('');
  private readonly insert: Database.Statement<[string]>;
  private readonly page: Database.Statement<[string, number], { stream: string }>;
  private pending: string[] = [];
  private last: string | undefined;

  constructor() {
    this.db.pragma('journal_mode = OFF');
    this.db.pragma('synchronous = OFF');
    // 4 MB of cache: the rest of the names live in the temporary file.
    this.db.pragma('cache_size = -4096');
    this.db.exec('CREATE TABLE names (stream TEXT PRIMARY KEY) WITHOUT ROWID');
    this.insert = this.db.prepare('INSERT OR IGNORE INTO names (stream) VALUES (?)');
    this.page = this.db.prepare('SELECT stream FROM names WHERE stream > ? ORDER BY stream LIMIT ?');
  }

  add(stream: string): void {
    // A stream's events often follow one another: one row for the run of them.
    if (stream === this.last) return;
    this.last = stream;
    this.pending.push(stream);
    if (this.pending.length >= STREAM_PAGE) this.flush();
  }

  /** Writes what `add` gathered, in one transaction. */
  flush(): void {
    if (this.pending.length === 0) return;
    const names = this.pending;
    this.pending = [];
    this.db.transaction(() => {
      for (const name of names) this.insert.run(name);
    })();
  }

  /** Every name added, in bytewise order (SQLite's BINARY collation), a page at a time. */
  *pages(): Generator<string[]> {
    this.flush();
    for (let after = ''; ;) {
      const page = this.page.all(after, STREAM_PAGE).map((row) => row.stream);
      if (page.length > 0) yield page;
      if (page.length < STREAM_PAGE) return;
      after = page[page.length - 1];
    }
  }

  close(): void {
    this.db.close();
  }
}

/**
 * The anchored heads under a prefix in stream-name order, a page at a time where the store can
 * page them (`anchoredHeadsPage`), all at once otherwise.
 */
export async function* headPages(store: EventStore, prefix: string): AsyncGenerator<StreamHead[]> {
  if (!store.keepsAnchors) return;
  if (!store.anchoredHeadsPage) {
    const all = await store.anchoredHeads(prefix);
    if (all.length > 0) yield all;
    return;
  }
  for (let after = ''; ;) {
    const page = await store.anchoredHeadsPage(prefix, after, STREAM_PAGE);
    if (page.length > 0) yield page;
    if (page.length < STREAM_PAGE) return;
    after = page[page.length - 1].stream;
  }
}

/** Reads an ordered sequence of pages one item at a time, looking at the next before taking it. */
export class PagedCursor<T> {
  private page: T[] = [];
  private index = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<T[]> | Iterator<T[]>) {}

  async peek(): Promise<T | undefined> {
    while (this.index >= this.page.length) {
      if (this.done) return undefined;
      const next = await this.source.next();
      if (next.done) {
        this.done = true;
        return undefined;
      }
      this.page = next.value;
      this.index = 0;
    }
    return this.page[this.index];
  }

  async take(): Promise<T | undefined> {
    const item = await this.peek();
    if (item !== undefined) this.index += 1;
    return item;
  }
}
