/**
 * The audit runs while the service appends (at start, on demand): a stream first appended after the
 * audit read the log is not a deleted stream (docs/reliability.md).
 */
import { NO_STREAM, StoreUnavailableError } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

it('a stream appended while the audit runs is not reported deleted', async () => {
  const store = SqliteEventStore.open({ file: ':memory:' });
  try {
    const first = 'op-acme:run/first';
    await store.append(first, NO_STREAM, sealEvents(first, undefined, [newEvent('A')]));
    const heads = store.anchoredHeadsPage.bind(store);
    // Between the pass over the log and the read of the heads, another caller appends a new stream.
    store.anchoredHeadsPage = async (prefix: string, after: string, limit: number) => {
      const late = 'op-acme:run/late';
      if (!(await store.anchoredHead(late)))
        await store.append(late, NO_STREAM, sealEvents(late, undefined, [newEvent('B')]));
      return heads(prefix, after, limit);
    };
    const audit = await auditLog(store);
    expect(audit.findings).toEqual([]);
  } finally {
    await store.close();
  }
});

it('a stream that cannot be read again while the audit runs fails the audit instead of being reported tampered', async () => {
  const store = SqliteEventStore.open({ file: ':memory:' });
  try {
    const stream = 'op-acme:run/busy';
    const first = sealEvents(stream, undefined, [newEvent('A')]);
    await store.append(stream, NO_STREAM, first);
    const heads = store.anchoredHeadsPage.bind(store);
    // Appended to right after the audit read the heads, so the stream is longer than its head there
    // and the audit reads it again; that second read fails.
    store.anchoredHeadsPage = async (prefix: string, after: string, limit: number) => {
      const read = await heads(prefix, after, limit);
      if (after !== '') return read;
      await store.append(stream, 0, sealEvents(stream, { revision: 0, hash: first[0].metadata.hash }, [newEvent('B')]));
      return read;
    };
    store.readStreamAnchored = async () => {
      throw new StoreUnavailableError('the store went away');
    };
    await expect(auditLog(store)).rejects.toBeInstanceOf(StoreUnavailableError);
  } finally {
    await store.close();
  }
});
