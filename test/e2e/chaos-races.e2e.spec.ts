/**
 * docs/contract.md §4.8: two runtimes racing on one operation cannot both dispatch. Twenty dispatches of the
 * same attempt arrive at once; exactly one is granted and the nineteen others are refused and
 * recorded as DispatchRefused, on one service process, on two processes sharing one SQLite file
 * (WAL, LEDGER_EVENTS_FILE), and on two processes sharing the EventStoreDB protocol double. The
 * log is then read from the store itself, not through the service.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StoredEvent } from '../../src/store/event-store.port';
import { verifyChain } from '../../src/store/hash-chain';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { fact, ledgerAt, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const RACERS = 20;
const ROUNDS = 3;
const INPUT = 'sha256:race-input';

async function plan(baseUrl: string, ref: string): Promise<void> {
  const answer = await ledgerAt(baseUrl).submit(ref, [
    fact('StepPlanned', {
      run_id: ref.split('/')[0],
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: INPUT,
      policy: { max_attempts: 3 },
    }),
  ]);
  expect(answer.status).toBe(200);
}

/** Fires every dispatch before awaiting any, spread over the given instances in turn. */
async function race(baseUrls: readonly string[], ref: string): Promise<Array<HttpAnswer & { eventId: string }>> {
  const sends = Array.from({ length: RACERS }, (_, index) => {
    const eventId = randomUUID();
    const baseUrl = baseUrls[index % baseUrls.length];
    return ledgerAt(baseUrl)
      .submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: INPUT }, eventId)])
      .then((answer) => ({ ...answer, eventId }));
  });
  return Promise.all(sends);
}

function expectOneGrant(answers: ReadonlyArray<HttpAnswer & { eventId: string }>, stream: StoredEvent[]) {
  const granted = answers.filter((answer) => answer.status === 200);
  const refused = answers.filter((answer) => answer.status === 409);
  expect(granted).toHaveLength(1);
  expect(granted[0].body.state.status).toBe('dispatched');
  expect(refused).toHaveLength(RACERS - 1);
  for (const answer of refused) expect(answer.body.code).toBe('ATTEMPT_IN_FLIGHT');

  // The store agrees: one granted attempt, every refusal recorded under its own event id, one chain.
  const dispatched = stream.filter((event) => event.type === 'AttemptDispatched');
  expect(dispatched.map((event) => event.event_id)).toEqual([granted[0].eventId]);
  const refusals = stream.filter((event) => event.type === 'DispatchRefused');
  expect(refusals.map((event) => event.event_id).sort()).toEqual(refused.map((answer) => answer.eventId).sort());
  expect(refusals.every((event) => (event.data as { code: string }).code === 'ATTEMPT_IN_FLIGHT')).toBe(true);
  const toDispatched = stream.filter(
    (event) => event.type === 'TransitionRecorded' && (event.data as { to: string }).to === 'dispatched',
  );
  expect(toDispatched).toHaveLength(1);
  expect(stream.map((event) => event.revision)).toEqual(stream.map((_, index) => index));
  expect(verifyChain(stream)).toBeUndefined();
}

function sqliteStream(file: string, stream: string): StoredEvent[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows = db.prepare('SELECT * FROM events WHERE stream = ? ORDER BY revision').all(stream) as Array<
      Record<string, any>
    >;
    return rows.map(
      (row) => ({ ...row, data: JSON.parse(row.data), metadata: JSON.parse(row.metadata) }) as StoredEvent,
    );
  } finally {
    db.close();
  }
}

const streamName = (ref: string) => `op-default:${ref}`;

describe('20 simultaneous dispatches on one operation grant exactly one', () => {
  test('on one service process', async () => {
    const ledger = await startLedger();
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const ref = `run_race1/step_${round}`;
        await plan(ledger.baseUrl, ref);
        const answers = await race([ledger.baseUrl], ref);
        expectOneGrant(answers, sqliteStream(join(ledger.dataDir, 'events.sqlite'), streamName(ref)));
      }
    } finally {
      await ledger.stop();
      ledger.cleanup();
    }
  });

  test('on two service processes sharing one SQLite file in WAL mode, each with its own read models', async () => {
    const shared = mkdtempSync(join(tmpdir(), 'ledger-race-shared-'));
    const eventsFile = join(shared, 'events.sqlite');
    const env = { LEDGER_EVENTS_FILE: eventsFile };
    const instances: LedgerProcess[] = [];
    try {
      instances.push(await startLedger({ env }));
      instances.push(await startLedger({ env }));
      for (let round = 0; round < ROUNDS; round++) {
        const ref = `run_race2/step_${round}`;
        await plan(instances[round % 2].baseUrl, ref);
        const answers = await race(
          instances.map((instance) => instance.baseUrl),
          ref,
        );
        expectOneGrant(answers, sqliteStream(eventsFile, streamName(ref)));
        // Both processes decide from the same log: each answers the state the other wrote.
        const states = await Promise.all(instances.map((instance) => ledgerAt(instance.baseUrl).state(ref)));
        expect(states[0].body).toEqual(states[1].body);
      }
      const journal = (
        new Database(eventsFile, { readonly: true }).pragma('journal_mode', { simple: true }) as string
      ).toLowerCase();
      expect(journal).toBe('wal');
      // The log is the shared file only; nothing was written beside each instance's own data.
      for (const instance of instances) expect(existsSync(join(instance.dataDir, 'events.sqlite'))).toBe(false);
    } finally {
      for (const instance of instances) {
        await instance.stop();
        instance.cleanup();
      }
      rmSync(shared, { recursive: true, force: true });
    }
  });

  test('on two service processes sharing the EventStoreDB protocol double', async () => {
    const double = await EventStoreDbProtocolDouble.start();
    const env = { LEDGER_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: double.connectionString };
    const instances: LedgerProcess[] = [];
    try {
      instances.push(await startLedger({ env }));
      instances.push(await startLedger({ env }));
      for (let round = 0; round < ROUNDS; round++) {
        const ref = `run_race3/step_${round}`;
        await plan(instances[round % 2].baseUrl, ref);
        const answers = await race(
          instances.map((instance) => instance.baseUrl),
          ref,
        );
        const decode = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString('utf8'));
        const stream = double.log.events
          .filter((event) => event.stream === streamName(ref))
          .map(
            (event) =>
              ({
                stream: event.stream,
                revision: Number(event.revision),
                position: Number(event.position),
                event_id: event.id,
                type: event.type,
                data: decode(event.data),
                metadata: decode(event.customMetadata),
              }) as StoredEvent,
          );
        expectOneGrant(answers, stream);
      }
    } finally {
      for (const instance of instances) {
        await instance.stop();
        instance.cleanup();
      }
      await double.stop();
    }
  });
});
