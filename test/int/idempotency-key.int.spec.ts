/**
 * The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header) on the submit route, which
 * startStep uses, against the built service: the same key and body answer the first answer again
 * and append nothing; the same key with another body is 422 IDEMPOTENCY_KEY_REUSED; keys are scoped
 * per API key; a malformed key is 400; the SDK sends one key per call, the same on each resend.
 */
import { randomUUID } from 'node:crypto';
import { LedgerClient } from '@recovery-ledger/client';
import { fact, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const KEY_A = 'idem-runtime-key-a-0000001';
const KEY_B = 'idem-runtime-key-b-0000001';
const KEYS = `${KEY_A}:runtime:acme,${KEY_B}:runtime:acme`;

const planned = (ref: string) =>
  fact('StepPlanned', {
    run_id: 'run_idem',
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: `sha256:${ref}`,
    policy: {},
  });

describe('Idempotency-Key on submits', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS } });
  }, 60_000);
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const submit = (ref: string, body: unknown, key: string | undefined, apiKey = KEY_A) =>
    request(ledger.baseUrl, 'POST', `/v1/operations/${encodeURIComponent(ref)}/events`, body, {
      authorization: `Bearer ${apiKey}`,
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    });
  const eventCount = async (ref: string) =>
    (
      await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(ref)}/events`, undefined, {
        authorization: `Bearer ${KEY_A}`,
      })
    ).body.events.length;

  it('answers the same key and body with the first answer, replayed, and appends nothing more', async () => {
    const ref = `run_idem/${randomUUID().slice(0, 8)}`;
    const body = { events: [planned(ref)] };
    const key = `"${randomUUID()}"`;
    const first = await submit(ref, body, key);
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.body.results).toEqual([{ event_id: body.events[0].event_id, status: 'appended' }]);
    const again = await submit(ref, body, key);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await eventCount(ref)).toBe(2); // StepPlanned and the transition it caused
    // Without the header the ledger's own event ids still answer as the first time (results duplicate).
    expect((await submit(ref, body, undefined)).body.results).toEqual([
      { event_id: body.events[0].event_id, status: 'duplicate' },
    ]);
  });

  it('refuses the same key with another body or route as 422 IDEMPOTENCY_KEY_REUSED, writing nothing', async () => {
    const ref = `run_idem/${randomUUID().slice(0, 8)}`;
    const key = randomUUID();
    expect((await submit(ref, { events: [planned(ref)] }, key)).status).toBe(200);
    const other = await submit(
      ref,
      { events: [fact('AttemptDispatched', { attempt: 1, input_hash: `sha256:${ref}` })] },
      key,
    );
    expect(other.status).toBe(422);
    expect(other.contentType).toMatch(/^application\/problem\+json/);
    expect(other.body).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 422 });
    const elsewhere = `${ref}-b`;
    expect((await submit(elsewhere, { events: [planned(elsewhere)] }, key)).body).toMatchObject({
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
    expect(await eventCount(ref)).toBe(2); // StepPlanned and the transition it caused
    expect(
      (
        await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(elsewhere)}`, undefined, {
          authorization: `Bearer ${KEY_A}`,
        })
      ).status,
    ).toBe(404);
    // Scoped per API key: another key of the tenant may use the same text for its own request.
    const mine = `${ref}-c`;
    expect((await submit(mine, { events: [planned(mine)] }, key, KEY_B)).status).toBe(200);
  });

  it('refuses a malformed key as 400 naming the header', async () => {
    const ref = `run_idem/${randomUUID().slice(0, 8)}`;
    for (const bad of ['""', 'x'.repeat(256), '"unterminated']) {
      const answer = await submit(ref, { events: [planned(ref)] }, bad);
      expect(answer.body).toMatchObject({ status: 400, code: 'BAD_REQUEST', field: 'Idempotency-Key' });
    }
    expect(
      (
        await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(ref)}`, undefined, {
          authorization: `Bearer ${KEY_A}`,
        })
      ).status,
    ).toBe(404);
  });

  it('the SDK sends one key per call as an sf-string; resending that request is answered as the first time', async () => {
    const sent: Array<{ url: string; init: RequestInit }> = [];
    // The global fetch, recorded: the requests really go to the service.
    const client = new LedgerClient({
      baseUrl: ledger.baseUrl,
      apiKey: KEY_A,
      fetch: (url, init) => {
        sent.push({ url: String(url), init: init as RequestInit });
        return fetch(url, init);
      },
    });
    const ref = `run_idem/${randomUUID().slice(0, 8)}`;
    const first = await client.startStep({
      operationRef: ref,
      runId: 'run_idem',
      tool: 'create_invoice',
      input: { amount: 10 },
    });
    await client.planStep(`${ref}-2`, {
      run_id: 'run_idem',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:other',
    });
    const keys = sent.map((item) => (item.init.headers as Record<string, string>)['idempotency-key']);
    expect(keys).toHaveLength(2);
    for (const key of keys) expect(key).toMatch(/^"[0-9a-f-]{36}"$/);
    expect(keys[0]).not.toBe(keys[1]);
    // The first send again, byte for byte, as a retry after a lost answer would be.
    const before = await eventCount(ref);
    const resent = await fetch(sent[0].url, sent[0].init);
    expect(resent.headers.get('idempotent-replayed')).toBe('true');
    expect(await resent.json()).toEqual(first);
    expect(await eventCount(ref)).toBe(before);
  });
});
