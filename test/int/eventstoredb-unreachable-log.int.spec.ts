/**
 * `LEDGER_STORE=eventstoredb` with no server listening (EventStoreDB not started yet): the service
 * starts, answers 503 STORE_UNAVAILABLE, and its log says so in lines of one reason each, never a
 * stack, with the repeats of what retries (the projection engine every second, the rollback check
 * every two) gathered into lines that count them (src/logging/failure-log.ts).
 */
import { freePort } from '../support/ledger-process';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { untilValue } from '../support/until';

jest.setTimeout(60_000);

let ledger: InProcessLedger;

beforeAll(async () => {
  const closed = await freePort(); // nothing listens on it
  ledger = await startLedgerInProcess({
    env: { LEDGER_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: `esdb://127.0.0.1:${closed}?tls=false` },
  });
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

interface LogLine {
  context?: string;
  msg: string;
  store_unavailable?: string;
  failures?: number;
  [field: string]: unknown;
}

const lines = (): LogLine[] =>
  ledger
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);

describe('EventStoreDB configured but not reachable', () => {
  it('logs the unreachable store in lines of one reason each, never a stack, its repeats counted', async () => {
    // The projection engine's first repeat line comes after its first gap: by then every start-up
    // step has met the store at least once.
    const repeat = await untilValue('a line counting repeated failures', () =>
      lines().find((line) => line.context === 'ProjectionEngine' && (line.failures ?? 0) > 1),
    );
    expect(repeat.store_unavailable).toMatch(/ECONNREFUSED/);
    const logged = lines();
    const aboutTheStore = logged.filter((line) => JSON.stringify(line).includes('ECONNREFUSED'));
    expect(aboutTheStore.length).toBeGreaterThanOrEqual(3);
    for (const line of aboutTheStore) {
      expect({ msg: line.msg, fields: Object.keys(line).filter((key) => key === 'err' || key === 'stack') }).toEqual({
        msg: line.msg,
        fields: [],
      });
      expect({ msg: line.msg, reason: line.store_unavailable }).toEqual({
        msg: line.msg,
        reason: expect.not.stringMatching(/Resolution note|\n/),
      });
    }
    expect(JSON.stringify(logged)).not.toContain('"stack"');
    expect(repeat.msg).toMatch(/\(still failing: \d+ times since /);
  });
});
