/**
 * Another process sharing the log: appends one event at a time to one stream of a SQLite file until
 * told to stop (a line on stdin or the deadline), then prints how many it appended.
 *   node --require ./test/chaos/swc-register.cjs test/support/sqlite-appender.ts <file> <stream> <ms>
 */
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

async function main(): Promise<void> {
  const [file, stream, ms] = process.argv.slice(2);
  const store = SqliteEventStore.open({ file });
  const deadline = Date.now() + Number(ms);
  const anchored = await store.anchoredHead(stream);
  let head: { revision: number; hash: string } | undefined = anchored && {
    revision: anchored.revision,
    hash: anchored.hash,
  };
  let appended = 0;
  process.stdout.write('ready\n');
  while (Date.now() < deadline) {
    const sealed = sealEvents(stream, head, [newEvent('Appended', { n: appended })]);
    await store.append(stream, head?.revision ?? NO_STREAM, sealed);
    head = { revision: (head?.revision ?? -1) + 1, hash: sealed[0].metadata.hash };
    appended += 1;
  }
  await store.close();
  process.stdout.write(`appended ${appended}\n`);
}

void main();
