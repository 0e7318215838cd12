/**
 * A possible duplicate write reaches subscribers (docs/contract.md §4.9, docs/webhooks.md): a late
 * success of attempt 1 after attempt 2 was granted, or a late unknown outcome (its call may have
 * reached the provider), is delivered as `operation.possible_duplicate` to a real receiving HTTP
 * server, signed, from the built service as a real process.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySignature } from '../../src/webhooks/webhook-signature';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const RUNTIME_KEY = 'dupe-hook-runtime-key-00001';
const ADMIN_KEY = 'dupe-hook-admin-key-0000001';
const REF = `run_${randomUUID().slice(0, 6)}/invoice_1`;

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
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`, LEDGER_WEBHOOK_ALLOW_PRIVATE: '1' },
  });
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  await new Promise((resolve) => server?.close(resolve));
});

it('delivers operation.possible_duplicate when a late success follows a later grant', async () => {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  const subscribed = await request(
    ledger.baseUrl,
    'POST',
    '/v1/admin/webhooks',
    { url, kinds: ['operation.possible_duplicate'] },
    { authorization: `Bearer ${ADMIN_KEY}` },
  );
  expect(subscribed.status).toBe(201);

  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  const plan = {
    run_id: REF.split('/')[0],
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: 'sha256:h1',
    policy: { consistency_window_ms: 0, dispatch_timeout_ms: 1_000 },
  };
  expect((await runtime.submit(REF, [fact('StepPlanned', plan)])).status).toBe(200);
  expect(
    (
      await runtime.submit(REF, [
        fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:h1', call_window_ms: 100 }),
      ])
    ).status,
  ).toBe(200);
  const notFound = () =>
    runtime.submit(REF, [fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() })]);
  await until(notFound, (answer) => answer.status === 200, 'a conclusive not_found');
  expect((await runtime.submit(REF, [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:h1' })])).status).toBe(
    200,
  );
  const late = await runtime.submit(REF, [
    fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(REF, 'inv_1') }),
  ]);
  expect(late.body.code).toBe('ATTEMPT_MISMATCH');

  const delivery = await until(
    async () => received,
    (list) => list.length > 0,
    'the delivery',
  );
  const [{ headers, body }] = delivery;
  expect(headers['recovery-ledger-event']).toBe('operation.possible_duplicate');
  expect(verifySignature(String(headers['recovery-ledger-signature']), body, subscribed.body.secret)).toMatchObject({
    ok: true,
  });
  expect(JSON.parse(body)).toMatchObject({
    type: 'operation.possible_duplicate',
    tenant: 'acme',
    data: { operation_ref: REF },
  });
});

it('delivers operation.possible_duplicate when a late unknown outcome follows a later attempt that succeeded', async () => {
  const ref = `run_${randomUUID().slice(0, 6)}/invoice_2`;
  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  const plan = {
    run_id: ref.split('/')[0],
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: 'sha256:h1',
    policy: { consistency_window_ms: 0, dispatch_timeout_ms: 1_000 },
  };
  expect((await runtime.submit(ref, [fact('StepPlanned', plan)])).status).toBe(200);
  const first = fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:h1', call_window_ms: 100 });
  expect((await runtime.submit(ref, [first])).status).toBe(200);
  const notFound = () =>
    runtime.submit(ref, [fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() })]);
  await until(notFound, (answer) => answer.status === 200, 'a conclusive not_found');
  expect((await runtime.submit(ref, [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:h1' })])).status).toBe(
    200,
  );
  const second = fact('EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.success(ref, 'inv_2') });
  expect((await runtime.submit(ref, [second])).body.state.status).toBe('succeeded');

  // Attempt 1's dispatcher wakes, its call cut off after it may have left: unknown, not a success.
  const late = await runtime.submit(ref, [
    fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }),
  ]);
  expect(late.body).toMatchObject({ code: 'ATTEMPT_MISMATCH', state: { status: 'succeeded' } });

  const forRef = (list: typeof received) => list.filter(({ body }) => JSON.parse(body).data?.operation_ref === ref);
  const [delivery] = await until(
    async () => forRef(received),
    (list) => list.length > 0,
    'the delivery for the late unknown outcome',
  );
  expect(delivery.headers['recovery-ledger-event']).toBe('operation.possible_duplicate');
  expect(JSON.parse(delivery.body)).toMatchObject({
    type: 'operation.possible_duplicate',
    data: { operation_ref: ref },
  });
});
