import fc from 'fast-check';
import type { StoredEvent } from '../../../../src/store/event-store.port';
import { envelopes, LedgerScenario } from './ledger-scenario';

type EnvelopeKind = keyof typeof envelopes;

export type HistoryCommand =
  | { kind: 'plan'; op: number; tool: number }
  | { kind: 'dispatch'; op: number; attempt: number; input: number }
  | { kind: 'envelope'; op: number; attempt: number; envelope: EnvelopeKind }
  | { kind: 'verify'; op: number; outcome: 'found_committed' | 'not_found' | 'lookup_unavailable' }
  | { kind: 'approve'; op: number; decision: 'granted' | 'denied' }
  | { kind: 'advance'; ms: number };

const op = fc.integer({ min: 0, max: 4 });
/** 0 means "the attempt a careful runtime would send"; 1..4 a sloppy runtime's guess. */
const attempt = fc.oneof(
  { weight: 6, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }) },
);

/**
 * Random fact sequences, mostly what a careful runtime sends (the next attempt, the envelope of the
 * attempt in flight) with some mistakes mixed in. The ledger refuses what is wrong, as it would a
 * real runtime's, so what gets stored is always a valid history, decided by the real decider.
 */
export const historyCommands = fc.array(
  fc.oneof(
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('plan' as const), op, tool: fc.integer({ min: 0, max: 1 }) }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('dispatch' as const),
        op,
        attempt,
        input: fc.integer({ min: 0, max: 1 }),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('envelope' as const),
        op,
        attempt,
        envelope: fc.constantFrom<EnvelopeKind>(
          'committed',
          'unknown',
          'invalidInput',
          'rateLimited',
          'needsApproval',
          'conflict',
        ),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('verify' as const),
        op,
        outcome: fc.constantFrom('found_committed' as const, 'not_found' as const, 'lookup_unavailable' as const),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('approve' as const),
        op,
        decision: fc.constantFrom('granted' as const, 'denied' as const),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 45_000 }) }),
    },
  ),
  { minLength: 1, maxLength: 40 },
);

const TOOLS = ['create_invoice', 'send_email'];

/** Operation n: two runs, and the last operation in a second tenant (isolation is part of the model). */
export function operationOf(n: number): { ref: string; run: string; tenant: string } {
  return { ref: `run_${n % 2}/step_${n}`, run: `run_${n % 2}`, tenant: n === 4 ? 'globex' : 'acme' };
}

export async function runHistory(
  commands: readonly HistoryCommand[],
  scenario = new LedgerScenario(),
): Promise<StoredEvent[]> {
  for (const command of commands) {
    if (command.kind === 'advance') {
      scenario.clock.advance(command.ms);
      continue;
    }
    const { ref, run, tenant } = operationOf(command.op);
    const { view } = await scenario.ledger.getState(tenant, ref).catch(() => ({ view: undefined }));
    if (!view && command.kind !== 'plan') {
      // A careful runtime plans before anything else; the refusal of a fact before the plan is
      // covered by the decider's own tests.
      await scenario.plan(ref, {
        run_id: run,
        tool: TOOLS[command.op % 2],
        tenant,
        policy: { verification_tool: 'lookup_by_ref' },
      });
    }
    const next = (view?.attempts_used ?? 0) + 1;
    const current = view?.current_attempt ?? 1;
    switch (command.kind) {
      case 'plan':
        await scenario.plan(ref, {
          run_id: run,
          tool: TOOLS[command.tool],
          tenant,
          policy: { verification_tool: 'lookup_by_ref' },
        });
        break;
      case 'dispatch':
        await scenario.dispatch(ref, command.attempt || next, `h${command.input}`, tenant);
        break;
      case 'envelope': {
        // An envelope comes back from an attempt: dispatch one first if none is in flight.
        let attemptInFlight = current;
        if (view?.status !== 'dispatched') {
          const dispatched = await scenario.dispatch(ref, next, 'h1', tenant);
          if (dispatched.ok) attemptInFlight = next;
        }
        const notBefore = new Date(scenario.clock.ms + 10_000).toISOString();
        const envelope =
          command.envelope === 'rateLimited'
            ? envelopes.rateLimited(ref, notBefore)
            : (envelopes[command.envelope] as (ref: string) => object)(ref);
        await scenario.envelope(ref, command.attempt || attemptInFlight, envelope, tenant);
        break;
      }
      case 'verify':
        await scenario.verify(
          ref,
          command.outcome,
          command.outcome === 'found_committed' ? `ev_${command.op}` : undefined,
          tenant,
        );
        break;
      case 'approve':
        await scenario.submit(ref, 'ApprovalRecorded', { decision: command.decision, approver: 'alice' }, { tenant });
        break;
    }
  }
  return scenario.log();
}
