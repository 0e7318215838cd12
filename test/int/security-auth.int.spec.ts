/**
 * Keys and tenants on the whole service in the test's process (docs/contract.md §8–9, docs/security.md): how keys are given,
 * what the store records of them, that a tenant cannot tell another tenant's operation from one
 * that does not exist, and what an admin export holds. The local-mode banner and the refusals to
 * start are the process's own (src/main.ts), so they are test/e2e/security.e2e.spec.ts's.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { opPath } from '../support/http';
import { call, plan, rawRows } from '../support/key-calls';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
/** The actor id the ledger derives from a key: its hash's first 12 hex digits, so the id is no secret. */
const actorOf = (key: string) => `key_${sha256Hex(key).slice(0, 12)}`;

const ACME_RUNTIME = 'acme-runtime-9f3e1d7c5b2a4e60';
const ACME_ADMIN = 'acme-admin-0a1b2c3d4e5f6a7b8c';
const ACME_AUDITOR_FROM_FILE = 'acme-auditor-file-71c3e5a9d2b4';
const GLOBEX_RUNTIME = 'globex-runtime-2b4d6f8a0c1e3a5c';

const dispatch = () => ({
  event_id: randomUUID(),
  type: 'AttemptDispatched',
  data: { attempt: 1, input_hash: 'sha256:in' },
});

describe('keys and tenants', () => {
  let ledger: LedgerProcess;
  let keysDir: string;

  beforeAll(async () => {
    keysDir = mkdtempSync(join(tmpdir(), 'ledger-keys-'));
    const keysFile = join(keysDir, 'keys.txt');
    // One key by hash only, with the comments and blank lines an operator's file would have.
    writeFileSync(
      keysFile,
      `# acme's auditors\n\nsha256:${sha256Hex(ACME_AUDITOR_FROM_FILE)}:auditor:acme\n${GLOBEX_RUNTIME}:runtime:globex\n`,
    );
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${ACME_RUNTIME}:runtime:acme,${ACME_ADMIN}:admin:acme`,
        LEDGER_API_KEYS_FILE: keysFile,
        LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
        LOG_LEVEL: 'info',
      },
    });
  });
  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
    rmSync(keysDir, { recursive: true, force: true });
  });

  test("the submitting key's id, never the key, is recorded as the actor of every event", async () => {
    const ref = 'run_actor/step_1';
    expect(
      (
        await call(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, ACME_RUNTIME, {
          events: [plan('run_actor', 'create_invoice')],
        })
      ).status,
    ).toBe(200);
    expect(
      (await call(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, ACME_RUNTIME, { events: [dispatch()] })).status,
    ).toBe(200);
    const rows = rawRows(ledger.dataDir).filter((row) => row.stream === `op-acme:${ref}`);
    expect(rows).toHaveLength(4);
    for (const row of rows) {
      const metadata = JSON.parse(String(row.metadata));
      expect({ actor: metadata.actor, tenant: metadata.tenant }).toEqual({
        actor: actorOf(ACME_RUNTIME),
        tenant: 'acme',
      });
    }
    // Not the key, not its full hash (which would let anyone holding the table test a guess offline
    // against a hash-configured key), in any column of any row.
    const table = JSON.stringify(rawRows(ledger.dataDir));
    for (const secret of [ACME_RUNTIME, sha256Hex(ACME_RUNTIME)]) expect(table).not.toContain(secret);
    // The same id is what readers see.
    const events = await call(ledger.baseUrl, 'GET', `${opPath(ref)}/events`, ACME_ADMIN);
    expect(new Set(events.body.events.map((event: { actor: string }) => event.actor))).toEqual(
      new Set([actorOf(ACME_RUNTIME)]),
    );
    expect(events.text).not.toContain(ACME_RUNTIME);
  });

  test('keys from LEDGER_API_KEYS_FILE and keys given by their SHA-256 work like any other', async () => {
    const ref = 'run_file/step_1';
    expect(
      (
        await call(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, GLOBEX_RUNTIME, {
          events: [plan('run_file', 'send_email')],
        })
      ).status,
    ).toBe(200);
    expect((await call(ledger.baseUrl, 'GET', opPath(ref), GLOBEX_RUNTIME)).status).toBe(200);
    // The hashed auditor key reads acme and may not write.
    expect((await call(ledger.baseUrl, 'GET', opPath('run_actor/step_1'), ACME_AUDITOR_FROM_FILE)).status).toBe(200);
    const refused = await call(ledger.baseUrl, 'POST', `${opPath('run_actor/step_2')}/events`, ACME_AUDITOR_FROM_FILE, {
      events: [plan('run_actor', 'x')],
    });
    expect({ status: refused.status, code: refused.body.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
    // Presenting the configured hash itself is not the key.
    const byHash = await call(ledger.baseUrl, 'GET', opPath('run_actor/step_1'), sha256Hex(ACME_AUDITOR_FROM_FILE));
    expect({ status: byHash.status, code: byHash.body.code }).toEqual({ status: 401, code: 'UNAUTHENTICATED' });
  });

  test("another tenant's operation answers exactly as one that does not exist", async () => {
    const ref = 'run_secret/step_1';
    expect(
      (
        await call(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, GLOBEX_RUNTIME, {
          events: [plan('run_secret', 'wire_money')],
        })
      ).status,
    ).toBe(200);
    const never = 'run_never/step_1';
    for (const suffix of ['', '/events']) {
      const theirs = await call(ledger.baseUrl, 'GET', `${opPath(ref)}${suffix}`, ACME_RUNTIME);
      const nobodys = await call(ledger.baseUrl, 'GET', `${opPath(never)}${suffix}`, ACME_RUNTIME);
      expect(theirs.status).toBe(404);
      expect(theirs.body.code).toBe('OPERATION_NOT_FOUND');
      // Same status, code, title, detail and headers but for the path each asked about.
      const { instance: a, ...theirProblem } = theirs.body;
      const { instance: b, ...nobodysProblem } = nobodys.body;
      expect(theirProblem).toEqual(nobodysProblem);
      expect([a, b]).toEqual([`${opPath(ref)}${suffix}`, `${opPath(never)}${suffix}`]);
      expect(theirs.headers.get('content-type')).toBe(nobodys.headers.get('content-type'));
    }
    // The owner still sees it.
    expect((await call(ledger.baseUrl, 'GET', opPath(ref), GLOBEX_RUNTIME)).status).toBe(200);
  });

  test("an admin's export holds its own tenant's streams, whole and in log order, and nothing else", async () => {
    const answer = await call(ledger.baseUrl, 'GET', '/v1/admin/export', ACME_ADMIN);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = answer.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const [header, ...rest] = lines;
    const footer = rest.pop();
    expect(header).toMatchObject({ kind: 'header', format: 'recovery-ledger-log', version: 1 });
    expect(footer).toMatchObject({ kind: 'footer', events: rest.length });
    expect(rest.every((line) => line.kind === 'event' && String(line.stream).startsWith('op-acme:'))).toBe(true);
    const positions = rest.map((line) => line.position);
    expect(positions).toEqual([...positions].sort((x, y) => x - y));
    const acmeRows = rawRows(ledger.dataDir).filter(
      (row) => String(row.stream).startsWith('op-acme:') && Number(row.position) <= header.head_position,
    );
    expect(rest.map((line) => line.event_id)).toEqual(acmeRows.map((row) => row.event_id));
    expect(answer.text).not.toMatch(/globex|wire_money|send_email/);
  });

  test('no key appears in any log line, for accepted and refused requests alike', async () => {
    // An unknown key and a role refused a write, beside the accepted requests above.
    await call(ledger.baseUrl, 'GET', opPath('run_actor/step_1'), 'not-a-real-key-at-all-0000');
    await call(ledger.baseUrl, 'POST', `${opPath('run_actor/step_1')}/events`, ACME_ADMIN, { events: [dispatch()] });
    const output = ledger.output();
    expect(output.length).toBeGreaterThan(0);
    for (const secret of [
      ACME_RUNTIME,
      ACME_ADMIN,
      ACME_AUDITOR_FROM_FILE,
      GLOBEX_RUNTIME,
      'not-a-real-key-at-all-0000',
    ]) {
      expect(output).not.toContain(secret);
    }
  });
});
