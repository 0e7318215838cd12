/**
 * Local mode and the start-up checks of the built service (docs/contract.md §8–9): what src/main.ts
 * says when it starts without keys, and when it refuses to start; both are the process's own, so they
 * run it. The keys and tenants themselves are test/int/security-auth.int.spec.ts's.
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { opPath } from '../support/http';
import { freePort, MAIN, startLedger } from '../support/ledger-process';

async function call(baseUrl: string, method: string, path: string, key: string | undefined, body?: unknown) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, text, body: parsed, headers: response.headers };
}

const plan = (runId: string, tool: string) => ({
  event_id: randomUUID(),
  type: 'StepPlanned',
  data: { run_id: runId, tool, side_effect: 'write', input_hash: 'sha256:in' },
});
function rawRows(dataDir: string): Array<Record<string, string | number>> {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT * FROM events ORDER BY position').all() as Array<Record<string, string | number>>;
  } finally {
    db.close();
  }
}

describe('local mode and the start-up checks', () => {
  test('without keys the service binds to loopback only, with tenant "default" and actor "local", and says so', async () => {
    const ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
    try {
      const ref = 'run_local/step_1';
      expect(
        (
          await call(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, undefined, {
            events: [plan('run_local', 'create_invoice')],
          })
        ).status,
      ).toBe(200);
      const [row] = rawRows(ledger.dataDir);
      expect(row.stream).toBe(`op-default:${ref}`);
      expect(JSON.parse(String(row.metadata))).toMatchObject({ actor: 'local', tenant: 'default' });
      expect(ledger.output()).toMatch(/LOCAL MODE/);
      expect(ledger.output()).toMatch(/127\.0\.0\.1/);
    } finally {
      await ledger.stop();
      ledger.cleanup();
    }
  });

  /** Runs the built service to its exit (it must not start), answering its exit code and output. */
  async function refusedStart(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'ledger-refused-'));
    const child = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        PORT: String(await freePort()),
        LEDGER_DATA_DIR: dataDir,
        LEDGER_API_KEYS: '',
        LEDGER_API_KEYS_FILE: '',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
    return { code, output };
  }

  test.each(['0.0.0.0', '::', '192.0.2.10'])(
    'asked to bind to %s without keys, it refuses to start with a clear message',
    async (host) => {
      const { code, output } = await refusedStart({ HOST: host });
      expect(code).toBe(1);
      expect(output).toContain(`refusing to listen on ${host} without API keys`);
      expect(output).not.toMatch(/listening on/);
    },
  );

  test.each([
    ['a malformed entry', 'just-a-key-without-role'],
    ['an unknown role', 'abcdefghijklmnopqrstu:superuser:acme'],
    ['a short key', 'short:runtime:acme'],
    ['a bad hash', 'sha256:1234:runtime:acme'],
    ['a bad tenant', 'abcdefghijklmnopqrstu:runtime:Acme Corp'],
  ])('with %s in LEDGER_API_KEYS it refuses to start, naming the entry but not its key', async (_name, entry) => {
    const { code, output } = await refusedStart({ LEDGER_API_KEYS: entry });
    expect(code).toBe(1);
    expect(output).toMatch(/API key entry 1/);
    expect(output).not.toContain(entry.split(':')[0] === 'sha256' ? entry : entry.split(':')[0]);
  });
});
