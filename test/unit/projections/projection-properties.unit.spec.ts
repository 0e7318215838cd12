import fc from 'fast-check';
import { evidenceTrailProjection, type EvidenceTrailDoc } from '@recovery-ledger/projections';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import type { ProjectedEvent } from '@recovery-ledger/projections';
import { stepStateProjection, type StepStateDoc } from '@recovery-ledger/projections';
import { fold, isPlanned } from '@recovery-ledger/core';
import { toRecorded } from '../../../src/ledger/stored-events';
import { foldProjection } from '../../../projections/test/support/fold-projection';
import { historyCommands, runHistory } from './support/random-history';
import { redelivered } from './support/redelivery';

const RUNS = { numRuns: 150 };

describe('projection properties over random valid histories', () => {
  it('the evidence trail of a prefix of the log is a prefix of the trail of the whole', async () => {
    await fc.assert(
      fc.asyncProperty(historyCommands, async (commands) => {
        const log = await runHistory(commands);
        const whole = foldProjection(evidenceTrailProjection, log).docs as Map<string, EvidenceTrailDoc>;
        for (let length = 0; length <= log.length; length++) {
          const prefix = foldProjection(evidenceTrailProjection, log.slice(0, length)).docs as Map<
            string,
            EvidenceTrailDoc
          >;
          for (const [key, doc] of prefix) {
            const full = whole.get(key) as EvidenceTrailDoc;
            expect(full.entries.slice(0, doc.entries.length)).toEqual(doc.entries);
          }
        }
        // Every event of an operation is in its trail, in log order.
        for (const doc of whole.values()) {
          const own = log.filter(
            (event) => event.metadata.tenant === doc.tenant && event.metadata.operation_ref === doc.operation_ref,
          );
          expect(doc.entries.map((entry) => entry.event_id)).toEqual(own.map((event) => event.event_id));
        }
      }),
      RUNS,
    );
  });

  it('delivering events again, in place or after later ones, changes no projection', async () => {
    await fc.assert(
      fc.asyncProperty(historyCommands, async (commands) => {
        const log = await runHistory(commands);
        for (const projection of LEDGER_PROJECTIONS) {
          expect(foldProjection(projection, redelivered(log)).docs).toEqual(foldProjection(projection, log).docs);
        }
      }),
      RUNS,
    );
  });

  it("the step state index agrees with the domain's own fold of each stream", async () => {
    await fc.assert(
      fc.asyncProperty(historyCommands, async (commands) => {
        const log = await runHistory(commands);
        const docs = foldProjection(stepStateProjection, log).docs as Map<string, StepStateDoc>;
        const streams = new Set(log.map((event) => event.stream));
        for (const stream of streams) {
          const events = log.filter((event) => event.stream === stream);
          const state = fold(events.map(toRecorded));
          const doc = docs.get(`${events[0].metadata.tenant}:${events[0].metadata.operation_ref}`) as StepStateDoc;
          expect(doc.status).toBe(state.status);
          if (isPlanned(state)) {
            expect(doc).toMatchObject({
              attempts_used: state.attempts_used,
              current_attempt: state.current_attempt,
              since: state.since,
              reason: state.reason,
              next_action: state.directive.next_action,
              attempts_remaining: state.directive.attempts_remaining,
            });
          }
        }
      }),
      RUNS,
    );
  });

  it('evolve never throws, whatever an event carries', () => {
    const event = fc.record({
      stream: fc.constantFrom('op-acme:a', 'op-acme:b'),
      revision: fc.nat(20),
      position: fc.integer({ min: 1, max: 1_000 }),
      event_id: fc.uuid(),
      type: fc.constantFrom(
        'StepPlanned',
        'AttemptDispatched',
        'EnvelopeRecorded',
        'VerificationRecorded',
        'ApprovalRecorded',
        'TransitionRecorded',
        'DispatchRefused',
        'Unknown',
      ),
      data: fc.oneof(
        fc.anything(),
        fc.dictionary(
          fc.constantFrom(
            'run_id',
            'tool',
            'attempt',
            'envelope',
            'to',
            'from',
            'code',
            'outcome',
            'directive',
            'policy',
          ),
          fc.anything(),
        ),
      ),
      metadata: fc.record({
        recorded_at: fc.oneof(fc.constant('2026-03-01T09:00:00.000Z'), fc.string()),
        actor: fc.string(),
        tenant: fc.constant('acme'),
        operation_ref: fc.constantFrom('a', 'b'),
      }),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 30 }), (events) => {
        const ordered = [...events].sort((a, b) => a.position - b.position) as ProjectedEvent[];
        for (const projection of LEDGER_PROJECTIONS) expect(() => foldProjection(projection, ordered)).not.toThrow();
      }),
      { numRuns: 300 },
    );
  });
});
