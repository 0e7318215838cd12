/**
 * The Python client's own suite (clients/python/tests, `python3 -m unittest`), run against the built
 * ledger and the example invoice provider, each started here as a real process, named to Python in
 * the environment. Before it runs, the TypeScript SDK plans a step that Python then resumes, so the
 * two SDKs are checked against each other on the real service, not only against shared vectors.
 *
 * Without python3 (3.10 or later) on the PATH the test is skipped with one printed line.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { executeWrite, LedgerClient } from '@recovery-ledger/client';
import { invoiceTools } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { startProviderProcess, type ProviderProcess } from '../support/provider-process';

const ROOT = resolve(__dirname, '../..');
const PYTHON = process.env.PYTHON ?? 'python3';

function pythonVersion(): { ok: true } | { ok: false; why: string } {
  const probe = spawnSync(PYTHON, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return { ok: false, why: `${PYTHON} is not on the PATH` };
  const [major, minor] = probe.stdout.trim().split('.').map(Number);
  if (major < 3 || (major === 3 && minor < 10))
    return { ok: false, why: `${PYTHON} is ${probe.stdout.trim()}; the client needs 3.10+` };
  return { ok: true };
}

const python = pythonVersion();
if (!python.ok) console.log(`Python client suite skipped: ${python.why}.`);
const describePython = python.ok ? describe : describe.skip;

const TENANTS = ['contract', 'crash', 'client', 'cross', 'worker'] as const;

describePython('Python client (clients/python) against the built ledger and the example provider', () => {
  let ledgerProcess: LedgerProcess;
  let provider: ProviderProcess;
  const keys: Record<string, string> = Object.fromEntries(
    [...TENANTS, 'auditor'].map((name) => [name, randomBytes(16).toString('hex')]),
  );

  beforeAll(async () => {
    const apiKeys = [...TENANTS.map((name) => `${keys[name]}:runtime:py_${name}`), `${keys.auditor}:auditor:py_client`];
    [ledgerProcess, provider] = await Promise.all([
      startLedger({ env: { LEDGER_API_KEYS: apiKeys.join(',') } }),
      startProviderProcess(),
    ]);
  });

  afterAll(async () => {
    await provider?.stop();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
  });

  it('passes, integration tests included', async () => {
    // A step planned from TypeScript that the provider refused as invalid: Python resumes it.
    const step = {
      operationRef: `run_cross_${randomBytes(4).toString('hex')}/invoice_1`,
      runId: 'run_cross',
      tool: 'create_invoice',
      input: {
        customer_id: 'cus_1',
        amount_cents: 1250,
        currency: 'EUR',
        note: 'café ✓',
        lines: [{ sku: 'a', qty: 1.0 }],
      },
      policy: { max_attempts: 3, consistency_window_ms: 300 },
    };
    const faults = await fetch(`${provider.url}/__faults`, {
      method: 'POST',
      body: JSON.stringify({ operation_ref: step.operationRef, fault: { kind: 'bad-request', field: 'customer_id' } }),
    });
    expect(faults.status).toBe(200);
    const ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl, apiKey: keys.cross });
    const planned = await executeWrite(ledger, step, invoiceTools(provider.url).createInvoice);
    expect(planned.status).toBe('needs_input');

    const env = {
      ...process.env,
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONUNBUFFERED: '1',
      RL_TEST_LEDGER_URL: ledgerProcess.baseUrl,
      RL_TEST_PROVIDER_URL: provider.url,
      RL_TEST_KEYS: JSON.stringify(keys),
      RL_TEST_TS_STEP: JSON.stringify({
        operation_ref: step.operationRef,
        run_id: step.runId,
        tool: step.tool,
        input: step.input,
        policy: step.policy,
      }),
    };
    const args = ['-m', 'unittest', 'discover', '-s', 'clients/python/tests', '-t', 'clients/python', '-v'];
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolveRun) => {
      const child = spawn(PYTHON, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      // A hung suite is a failure with its output, not a stray process after jest gave up.
      const timer = setTimeout(() => {
        text += '\n(the Python suite did not finish in 280 s and was killed)';
        child.kill('SIGKILL');
      }, 280_000);
      child.stdout.on('data', (chunk) => (text += chunk));
      child.stderr.on('data', (chunk) => (text += chunk));
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolveRun({ code: exitCode, output: text });
      });
    });
    if (code !== 0) console.log(output);
    expect(code).toBe(0);
    const ran = /^Ran (\d+) tests? in/m.exec(output);
    expect(Number(ran?.[1] ?? 0)).toBeGreaterThanOrEqual(40);
    // Nothing skipped: the integration tests ran against the services started here.
    const skipped = output.split('\n').filter((line) => / \.\.\. skipped /.test(line));
    expect(skipped).toEqual([]);
  }, 300_000);
});
