/**
 * What a person did reaches subscribers (docs/contract.md §4.10, docs/webhooks.md): an
 * acknowledgement, a reopen, a manual verification and a cancel are each delivered under their
 * own kind to a real receiving HTTP server, signed, from the built service as a real process.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySignature } from '../../src/webhooks/webhook-signature';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const RUNTIME_KEY = 'ops-hook-runtime-key-000001';
const OPERATOR_KEY = 'ops-hook-operator-key-00001';
const ADMIN_KEY = 'ops-hook-admin-key-00000001';
const KINDS = ['escalation.acknowledged', 'operation.reopened', 'operation.verified_manually', 'operation.cancelled'];

let ledger: LedgerProcess;
let server: Server;
const received: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  ledger = await startLedger({
    // The receiver is on loopback, which a production ledger refuses as a webhook target.
    env: {
      LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${ADMIN_KEY}:admin:acme`,
      LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
    },
  });
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  await new Promise((resolve) => server?.close(resolve));
});

it('delivers each operator fact under its own kind', async () => {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  const subscribed = await request(
    ledger.baseUrl,
    'POST',
    '/v1/admin/webhooks',
    { url, kinds: KINDS },
    { authorization: `Bearer ${ADMIN_KEY}` },
  );
  expect(subscribed.status).toBe(201);

  const ref = `run_${randomUUID().slice(0, 6)}/refund_1`;
  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  const operator = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${OPERATOR_KEY}` });
  const ok = async (answer: Promise<{ status: number; body: { code?: string } }>) =>
    expect((await answer).status).toBe(200);
  const plan = {
    run_id: ref.split('/')[0],
    tool: 'refund_payment',
    side_effect: 'write',
    input_hash: 'sha256:h1',
    policy: { max_attempts: 1, consistency_window_ms: 0 },
  };
  await ok(runtime.submit(ref, [fact('StepPlanned', plan)]));
  await ok(runtime.submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:h1' })]));
  await ok(runtime.submit(ref, [fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.alreadyPaid(ref) })]));
  await ok(operator.submit(ref, [fact('EscalationAcknowledged', { assignee: 'ana' })]));
  await ok(operator.submit(ref, [fact('StepReopened', { attempts: 1, reason: 'checked with finance' })]));
  await ok(runtime.submit(ref, [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:h1' })]));
  await ok(
    runtime.submit(ref, [fact('EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.outcomeUnknown(ref) })]),
  );
  await ok(
    operator.submit(ref, [fact('OutcomeVerifiedManually', { outcome: 'not_found', note: 'nothing at the provider' })]),
  );
  await ok(operator.submit(ref, [fact('StepCancelled', { reason: 'the customer withdrew' })]));

  const deliveries = await until(
    async () => received,
    (list) => list.length >= KINDS.length,
    'the four deliveries',
  );
  expect(deliveries.map(({ headers }) => headers['recovery-ledger-event']).sort()).toEqual([...KINDS].sort());
  for (const { headers, body } of deliveries) {
    expect(verifySignature(String(headers['recovery-ledger-signature']), body, subscribed.body.secret)).toMatchObject({
      ok: true,
    });
    expect(JSON.parse(body)).toMatchObject({ tenant: 'acme', data: { operation_ref: ref } });
  }
});
