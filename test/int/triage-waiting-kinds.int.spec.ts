/**
 * The triage kinds of steps that wait on someone who went away (docs/operations.md, "The triage
 * queue"), against the built service: a scheduled retry past its not_before plus a grace that no
 * worker's lease holds (retry_overdue), and an input awaited longer than a threshold
 * (input_awaited). A retry a worker has taken is being run, and leaves the list.
 */
import { randomUUID } from 'node:crypto';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const RUNTIME_KEY = 'triage-wait-runtime-key-001';
const AUDITOR_KEY = 'triage-wait-auditor-key-001';

let ledger: LedgerProcess;
beforeAll(async () => {
  ledger = await startLedger({ env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme` } });
}, 60_000);
afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

it('lists an unheld overdue retry and an awaited input; a retry a worker holds is not overdue', async () => {
  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  const tool = `tool_${randomUUID().slice(0, 6)}`;
  let position = 0;
  const step = async (name: string, envelope: (ref: string) => unknown) => {
    const ref = `run_wait/${name}`;
    const plan = { run_id: 'run_wait', tool, side_effect: 'write', input_hash: 'sha256:in-1' };
    for (const event of [
      fact('StepPlanned', plan),
      fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }),
      fact('EnvelopeRecorded', { attempt: 1, envelope: envelope(ref) }),
    ]) {
      const answer = await runtime.submit(ref, [event]);
      expect(answer.status).toBe(200);
      position = Math.max(position, answer.body.position);
    }
    return ref;
  };
  // not_before already passed: the retry is due at once.
  const past = new Date(Date.now() - 1_000).toISOString();
  const unheld = await step('unheld', (ref) => seedEnvelopes.rateLimited(ref, past));
  const input = await step('input', (ref) => seedEnvelopes.invalidRecipient(ref));
  const triage = async (query: string) =>
    (
      await request(
        ledger.baseUrl,
        'GET',
        `/v1/triage?tool=${tool}&wait_for_position=${position}&${query}`,
        undefined,
        { authorization: `Bearer ${AUDITOR_KEY}` },
      )
    ).body;

  const byDefault = await triage('');
  expect(byDefault.items).toEqual([]);
  const asked = await triage('retry_grace_ms=0&input_after_ms=0');
  expect(
    asked.items.map((item: { operation_ref: string; kind: string }) => [item.operation_ref, item.kind]).sort(),
  ).toEqual([
    [input, 'input_awaited'],
    [unheld, 'retry_overdue'],
  ]);

  // A worker takes the retry: its lease holds it, so it is being run.
  const taken = await request(ledger.baseUrl, 'GET', `/v1/work?tool=${tool}&lease_ms=60000`, undefined, {
    authorization: `Bearer ${RUNTIME_KEY}`,
  });
  expect(taken.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([unheld]);
  const held = await triage('retry_grace_ms=0&input_after_ms=0');
  expect(held.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([input]);
  expect(held.counts.by_kind).toMatchObject({ retry_overdue: 0, input_awaited: 1 });
});
