/**
 * Figure 4: store-level append (no HTTP, no decision), one event per append with an expected
 * revision (a new stream each time: the first append of an operation), on a new file of the same
 * kind (SQLite, WAL, synchronous=FULL, the same disk), beside @event-driven-io/emmett-sqlite's
 * appendToStream measured right before it with the same events. (Emmett 0.38's append to an
 * existing stream runs `UPDATE … RETURNING` through `db.get`, which leaves the statement open, so
 * its COMMIT intermittently fails with SQLITE_BUSY "SQL statements in progress"; new streams take
 * its INSERT path, which is reliable.)
 *
 * Emmett's file store opens a connection per call and its transactions share that connection, so
 * concurrent appends on one file fail (SQLITE_BUSY, "Database handle is closed"); the like-for-like
 * comparison is therefore one writer awaiting each append. The ledger's store is also shown with
 * 50 appends in flight, the load the HTTP figures put on it, where group commit shares the fsync.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { NO_STREAM, type NewEvent } from '../../src/store/event-store.port';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { ensurePeers, loadPeer, PEER_PREFIX } from '../support/peers';
import type { FigureRow } from '../support/report';
import { benchUuid } from '../support/submit-bodies';
import type { StoredRow } from './batch-submit.figure';

interface EmmettStore {
  appendToStream(
    stream: string,
    events: Array<{ type: string; data: unknown; metadata?: unknown }>,
    options: { expectedStreamVersion: bigint },
  ): Promise<unknown>;
}
type GetEmmettStore = (options: { fileName: string }) => EmmettStore;

function emmett(): GetEmmettStore {
  // The CommonJS build of the package (it ships one), from the peers' own prefix; typed here by the part that is used.
  return loadPeer<{ getSQLiteEventStore: GetEmmettStore }>('@event-driven-io/emmett-sqlite').getSQLiteEventStore;
}

/** An append the peer store failed: counted apart, the run goes on. */
class EmmettFailure extends Error {}

interface Rate {
  appendsPerSecond: number;
  appends: number;
  ms: number;
}

/** `inFlight` writers, each awaiting its own appends: writer w's i-th append is appendOne(w, i, n). */
async function timed(
  seconds: number,
  maxAppends: number,
  inFlight: number,
  appendOne: (writer: number, i: number, n: number) => Promise<void>,
): Promise<Rate> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let next = 0;
  let done = 0;
  const worker = async (writer: number) => {
    for (let i = 0; performance.now() < deadline && next < maxAppends; i++) {
      try {
        await appendOne(writer, i, next++);
        done += 1;
      } catch (error) {
        if (!(error instanceof EmmettFailure)) throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, (_, writer) => worker(writer)));
  const ms = performance.now() - started;
  return { appendsPerSecond: done / (ms / 1000), appends: done, ms };
}

export async function storeAppendFigure(
  dir: string,
  template: StoredRow,
  seconds: number,
  log: (line: string) => void,
): Promise<FigureRow[]> {
  const data = JSON.parse(template.data) as NewEvent['data'];
  const metadata = JSON.parse(template.metadata) as NewEvent['metadata'];

  const peers = ensurePeers(log);
  if (!peers.has('@event-driven-io/emmett-sqlite') || !peers.has('sqlite3')) {
    // Figure 4 is a ratio to Emmett's append: without the peer there is no figure to print.
    log(`  figure 4 skipped: @event-driven-io/emmett-sqlite and sqlite3 could not be installed into ${PEER_PREFIX}`);
    return [];
  }
  log('  figure 4: Emmett appendToStream, then the ledger store (one writer), then the ledger store (50 in flight)');
  // Emmett 0.38 on sqlite3 5.1.7 intermittently fails a COMMIT with SQLITE_BUSY "SQL statements in
  // progress" (its INSERT/UPDATE … RETURNING runs through db.get, which leaves the statement open).
  // A failed append is counted, not retried, and a store is opened again; Emmett prints each
  // such error with console.log, which is muted meanwhile so the table stays readable.
  let emmettStore = emmett()({ fileName: join(dir, 'emmett.sqlite') });
  let emmettErrors = 0;
  const emmettStreams = { next: 0 };
  const print = console.log;
  console.log = () => undefined;
  let emmettRate: Rate;
  try {
    emmettRate = await timed(seconds, 50_000, 1, async () => {
      try {
        await emmettStore.appendToStream(
          `op-default:emmett/op_${emmettStreams.next++}`,
          [{ type: template.type, data, metadata }],
          {
            expectedStreamVersion: 0n,
          },
        );
      } catch (error) {
        emmettErrors += 1;
        if (emmettErrors > 1_000) throw error;
        // A new file: the failed connection may still hold the old one's write lock.
        emmettStore = emmett()({ fileName: join(dir, `emmett-${emmettErrors}.sqlite`) });
        throw new EmmettFailure();
      }
    });
  } finally {
    console.log = print;
  }

  const ours = async (file: string, inFlight: number): Promise<Rate> => {
    const store = SqliteEventStore.open({ file });
    try {
      return await timed(seconds, 500_000, inFlight, async (writer, i, n) => {
        const event: NewEvent = { event_id: benchUuid('fig4', n), type: template.type, data, metadata };
        await store.append(`op-default:ledger/op_${writer}_${i}`, NO_STREAM, [event]);
      });
    } finally {
      await store.close();
    }
  };
  const single = await ours(join(dir, 'store-single.sqlite'), 1);
  const concurrent = await ours(join(dir, 'store-concurrent.sqlite'), 50);
  return [
    {
      id: '4',
      name: 'store-level append, 1 event/append, one writer',
      figure: { label: 'ledger SqliteEventStore', value: single.appendsPerSecond, unit: 'appends/s' },
      baseline: { label: 'emmett-sqlite appendToStream', value: emmettRate.appendsPerSecond, unit: 'appends/s' },
      ratio: single.appendsPerSecond / emmettRate.appendsPerSecond,
      target: { text: '≥ 2×', met: single.appendsPerSecond / emmettRate.appendsPerSecond >= 2 },
      details: {
        ledger: single,
        emmett: { ...emmettRate, failed_appends: emmettErrors },
        streams: 'a new stream per append',
        durability: 'both WAL + synchronous=FULL (Emmett: SQLite default FULL, checked with PRAGMA synchronous)',
      },
    },
    {
      id: '4b',
      name: 'store-level append, 50 appends in flight (group commit)',
      figure: { label: 'ledger SqliteEventStore', value: concurrent.appendsPerSecond, unit: 'appends/s' },
      baseline: {
        label: 'emmett-sqlite, one writer (fails concurrently)',
        value: emmettRate.appendsPerSecond,
        unit: 'appends/s',
      },
      ratio: concurrent.appendsPerSecond / emmettRate.appendsPerSecond,
      details: { ledger: concurrent },
    },
  ];
}
