/**
 * A decision on a long stream costs what one on a short stream does, on PostgreSQL too
 * (docs/postgres.md, "Integrity"; docs/architecture.md, "Reading a stream"): the service in process
 * on a real database grows one step's stream to 2,000 events through its command path, and the
 * next decisions on it read from the store only the events after the state kept beside the stream
 * (`ledger_snapshots`), counted on the store (`eventsRead`), never timed.
 */
import { randomUUID } from 'node:crypto';
import type { SubmittedEvent } from '@recovery-ledger/core';
import type { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SNAPSHOT_EVERY } from '../../src/ledger/sealed-streams';
import { EVENT_STORE } from '../../src/store/event-store.port';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { fact, opPath, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { describeWithPostgres } from '../support/postgres';

const REF = 'run_long_pg/step_1';
const LENGTH = 2_000;
const ev = (type: SubmittedEvent['type'], data: Record<string, unknown>): SubmittedEvent => ({
  event_id: randomUUID(),
  type,
  data: data as SubmittedEvent['data'],
});

describeWithPostgres('a long stream on PostgreSQL', (database) => {
  let ledger: InProcessLedger;
  let store: PostgresEventStore;

  beforeAll(async () => {
    ledger = await startLedgerInProcess({
      // No whole-log audit behind the service: its reads would be counted with the decisions'.
      env: { LEDGER_STORE: 'postgres', DATABASE_URL: database().url, LEDGER_VERIFY_ON_START: 'off' },
    });
    store = ledger.app.get<PostgresEventStore>(EVENT_STORE);
    const service = ledger.app.get(LedgerService);
    const context = { tenant: 'default', actor: 'local', operationRef: REF };
    await service.submit(context, {
      events: [
        ev('StepPlanned', { run_id: 'run_long_pg', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
      ],
    });
    await service.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
    let answer = await service.submit(context, {
      events: [ev('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(REF, 'inv_1') })],
    });
    expect(answer.state.status).toBe('succeeded');
    // Dispatches on a succeeded step, each recorded as refused: the cheap way to a long stream.
    while (answer.revision < LENGTH - 1) {
      const count = Math.min(100, LENGTH - 1 - answer.revision);
      answer = await service.submit(context, {
        events: Array.from({ length: count }, () => ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })),
      });
    }
    expect(answer.revision).toBe(LENGTH - 1);
  }, 300_000);

  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  it('decides on it reading only the events after the state kept beside it', async () => {
    const reads: number[] = [];
    for (let n = 0; n < 5; n++) {
      const before = store.eventsRead;
      const answer = await request(ledger.baseUrl, 'POST', `${opPath(REF)}/events`, {
        events: [fact('AttemptDispatched', { attempt: 2, input_hash: 'h1' })],
      });
      expect(answer.status).toBe(200);
      reads.push(store.eventsRead - before);
    }
    process.stderr.write(`events read by each of 5 decisions on a ${LENGTH}-event stream: ${reads.join(', ')}\n`);
    // The store's count includes what the service's followers of the log (the webhook consumer)
    // read meanwhile, which can fall on any one decision: the median is the decisions' own cost.
    // Each folds from the latest kept state: at most SNAPSHOT_EVERY events and a few more, not the
    // stream's 2,000 (every one of them reads at least that many without kept states).
    const median = [...reads].sort((a, b) => a - b)[2];
    expect(median).toBeLessThan(SNAPSHOT_EVERY * 2);
  });
});
