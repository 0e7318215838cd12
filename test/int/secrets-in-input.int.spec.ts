/**
 * A plan's `input` is stored as sent and handed to workers (docs/contract.md, StepPlanned): one that
 * holds a credential is refused whole, by the same detector that redacts free text and refuses
 * identifiers (docs/security.md, "Secrets"), and nothing of it reaches the log or the work feed.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson } from '@recovery-ledger/core';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';

jest.setTimeout(120_000);

const hashOf = (input: unknown) => createHash('sha256').update(canonicalJson(input)).digest('hex');

describe('a credential in a plan input', () => {
  let ledger: InProcessLedger;
  const refusals: Array<{ what: string; status: number; code?: string; field?: string }> = [];

  beforeAll(async () => {
    ledger = await startLedgerInProcess({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } });
    // A plan with nothing secret in its input: the work feed hands it out, input and all.
    expect(await plan('run_input/clean', { customer_id: 'cus_42', memo: 'plain words' })).toMatchObject({
      status: 200,
    });
    for (const [index, [what, text]] of SECRET_CORPUS.entries()) {
      // Under a key that names nothing secret, so only the value's shape can give it away.
      const answer = await plan(`run_input/step_${index}`, { customer_id: 'cus_42', memo: text });
      refusals.push({ what, ...answer });
    }
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  async function plan(ref: string, input: Record<string, unknown>) {
    const response = await fetch(`${ledger.baseUrl}/v1/operations/${encodeURIComponent(ref)}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        events: [
          {
            event_id: randomUUID(),
            type: 'StepPlanned',
            data: {
              run_id: 'run_input',
              tool: 'create_invoice',
              side_effect: 'write',
              input_hash: hashOf(input),
              input,
            },
          },
        ],
      }),
    });
    const body = (await response.json()) as { code?: string; field?: string };
    return { status: response.status, code: body.code, field: body.field };
  }

  it('is refused 400, naming the field, whatever its kind (npm, GitLab, Hugging Face tokens included)', () => {
    expect(refusals).toEqual(
      SECRET_CORPUS.map(([what]) => ({ what, status: 400, code: 'BAD_REQUEST', field: 'events[0].data.input' })),
    );
  });

  it('is not handed out by the work feed', async () => {
    const response = await fetch(`${ledger.baseUrl}/v1/work?worker=w-input&tool=create_invoice&limit=100&wait_ms=0`);
    const text = await response.text();
    expect({
      status: response.status,
      clean: text.includes('plain words'),
      leaked: SECRET_CORPUS.filter(([, , secret]) => text.includes(secret)).map(([what]) => what),
    }).toEqual({ status: 200, clean: true, leaked: [] });
  });

  it('leaves nothing of it in any file of the data directory', () => {
    const files = readdirSync(ledger.dataDir).filter((name) => name.endsWith('.sqlite') || name.endsWith('-wal'));
    const leaked = files.flatMap((name) => {
      const bytes = readFileSync(join(ledger.dataDir, name)).toString('latin1');
      return SECRET_CORPUS.filter(([, , secret]) => bytes.includes(secret)).map(([what]) => `${name}: ${what}`);
    });
    expect(leaked).toEqual([]);
  });
});
