/**
 * Two processes share one SQLite log (LEDGER_EVENTS_FILE, docs/reliability.md). A stream and its
 * anchored head must be read from one snapshot: read one after the other, an append by the other
 * process between the two reads looks like a cut tail, and the ledger would refuse a healthy
 * operation with HISTORY_INTEGRITY_FAILED.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

const ROOT = resolve(__dirname, '../..');

it('a stream and its anchored head are one snapshot while another process appends to the file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-anchored-read-'));
  const file = join(dir, 'events.sqlite');
  const stream = 'op-acme:run/hot';
  const reader = SqliteEventStore.open({ file });
  try {
    await reader.append(stream, NO_STREAM, sealEvents(stream, undefined, [newEvent('Planned')]));
    const appender = spawn(
      process.execPath,
      ['--require', './test/chaos/swc-register.cjs', 'test/support/sqlite-appender.ts', file, stream, '1500'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let output = '';
    appender.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => appender.on('exit', done));
    await new Promise<void>((ready) => appender.stdout.once('data', () => ready()));

    let reads = 0;
    const mismatches: string[] = [];
    const revisionsSeen = new Set<number>();
    let running = true;
    void exited.then(() => (running = false));
    while (running) {
      const { events, head } = await reader.readStreamAnchored(stream);
      const last = events[events.length - 1];
      reads += 1;
      revisionsSeen.add(last.revision);
      if (head?.revision !== last.revision || head.hash !== last.metadata.hash) {
        mismatches.push(`read ${reads}: stream ends at ${last.revision}, head ${head?.revision}`);
      }
      await new Promise((turn) => setImmediate(turn));
    }
    expect(await exited).toBe(0);
    expect(output).toMatch(/appended \d+/);
    // The reads overlapped the other process's appends: they saw the stream at many lengths.
    expect(revisionsSeen.size).toBeGreaterThan(10);
    expect(mismatches).toEqual([]);
  } finally {
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
