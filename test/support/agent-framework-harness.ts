/**
 * What every agent-framework test runs against: the built ledger over real HTTP with a runtime and
 * an approver key (test/support/ledger-process.ts), the example invoice provider as a real process
 * with its idempotency OFF, so a second create is a second invoice (test/support/provider-process.ts),
 * the provider's create call and lookup as a runtime writes them (examples/invoice-tools.ts), and a
 * way to run an agent script as a child process, SIGKILL it mid-call and run it again to resume.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import {
  LedgerClient,
  inputHash,
  type LedgeredToolPolicy,
  type LedgeredToolRequest,
  type Lookup,
  type OperationState,
  type ToolCall,
} from '@recovery-ledger/client';
import { invoiceTools, type InvoiceInput } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from './ledger-process';
import { startProviderProcess, type ProviderProcess } from './provider-process';
import { until } from './until';

export type { InvoiceInput };

export const ROOT = resolve(__dirname, '../..');
export const TENANT = 'acme';
export const RUNTIME_KEY = 'agent-runtime-key-000000000001';
export const APPROVER_KEY = 'agent-approver-key-00000000001';

/** A fault the provider applies to matching requests (examples/invoice-provider, POST /__faults). */
export interface ProviderFault {
  fault: {
    kind:
      | 'rate-limit'
      | 'bad-request'
      | 'forbidden'
      | 'bad-gateway'
      | 'slow'
      | 'accept-then-timeout'
      | 'accept-then-destroy'
      | 'lookup-unavailable';
    retry_after_s?: number;
    delay_ms?: number;
    commit?: boolean;
    field?: string;
    message?: string;
  };
  operation_ref?: string;
  times?: number;
  on?: 'create' | 'lookup';
}

export interface AgentWorldOptions {
  /** The provider call's own timeout (default 1000 ms): past it, the outcome is unknown. */
  callTimeoutMs?: number;
  /** The policy every write tool of the tests gets (defaults below). */
  policy?: Partial<LedgeredToolPolicy>;
}

export interface AgentWorld {
  ledger: LedgerProcess;
  provider: ProviderProcess;
  /** The integrations' key: plans, dispatches, records; cannot grant an approval. */
  runtime: LedgerClient;
  /** A person's key: records ApprovalRecorded. */
  approver: LedgerClient;
  /** The create call (operation_ref as Idempotency-Key) and the lookup by operation_ref. */
  createInvoice: ToolCall<InvoiceInput>;
  lookup: Lookup;
  policy: LedgeredToolPolicy;
  callTimeoutMs: number;
  /** The fields of a callLedgeredTool request every create_invoice test shares. */
  writeTool(): Pick<
    LedgeredToolRequest<InvoiceInput>,
    'tool' | 'policy' | 'call' | 'lookup' | 'vouchedCodes' | 'callWindowMs'
  >;
  /** Invoices the provider committed for this operation_ref (counted at the commit). */
  invoicesFor(ref: string): Promise<number>;
  /** Invoices the provider committed, all refs. */
  totalInvoices(): Promise<number>;
  /** Create requests that reached the provider for this operation_ref (whatever became of them). */
  createRequests(ref: string): Promise<number>;
  /**
   * Create requests and invoices of one run, whatever refs its steps were given (every ref of a run
   * starts with the run id and a slash).
   */
  runWrites(runId: string): Promise<{ requests: number; invoices: number }>;
  fault(rule: ProviderFault): Promise<void>;
  /** The create, answered 429 (Retry-After 1 s) every time: each call is one create request, and writes nothing. */
  alwaysRateLimited: ToolCall<InvoiceInput>;
  state(ref: string): Promise<OperationState>;
  eventTypes(ref: string): Promise<string[]>;
  /** An approver's grant for the input the step asked approval for. */
  grant(ref: string): Promise<void>;
  /** The HTTP status the ledger answers when the runtime key tries to record a grant (403). */
  runtimeGrantStatus(ref: string): Promise<number>;
  /** The env an agent script needs to reach this world (see runAgentScript). */
  env(): Record<string, string>;
  stop(): Promise<void>;
}

export const DEFAULT_POLICY: LedgeredToolPolicy = { max_attempts: 3, consistency_window_ms: 2000 };
/** The provider codes the tests vouch for: the ledger shows them to the model as they are. */
export const VOUCHED_CODES = ['RATE_LIMITED'];

export async function startAgentWorld(options: AgentWorldOptions = {}): Promise<AgentWorld> {
  const ledger = await startLedger({
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:${TENANT},${APPROVER_KEY}:approver:${TENANT}` },
  });
  let provider: ProviderProcess;
  try {
    provider = await startProviderProcess(15_000, ['--no-idempotency']);
  } catch (error) {
    await ledger.stop();
    ledger.cleanup();
    throw error;
  }
  return agentWorldAt(ledger, provider, options);
}

/** The world around a ledger and a provider already running (an agent script builds it from env). */
export function agentWorldAt(
  ledger: LedgerProcess | { baseUrl: string },
  provider: ProviderProcess | { url: string },
  options: AgentWorldOptions = {},
): AgentWorld {
  const callTimeoutMs = options.callTimeoutMs ?? 1000;
  const runtime = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: RUNTIME_KEY });
  const approver = new LedgerClient({ baseUrl: ledger.baseUrl, apiKey: APPROVER_KEY });
  const { createInvoice, lookup } = invoiceTools(provider.url, { timeoutMs: callTimeoutMs });
  const policy = { ...DEFAULT_POLICY, ...options.policy };
  const stats = async () =>
    (await (await fetch(`${provider.url}/__stats`)).json()) as {
      created: Record<string, number>;
      create_requests: Record<string, number>;
    };
  const world: AgentWorld = {
    ledger: ledger as LedgerProcess,
    provider: provider as ProviderProcess,
    runtime,
    approver,
    createInvoice,
    lookup,
    policy,
    callTimeoutMs,
    writeTool: () => ({
      tool: 'create_invoice',
      policy,
      call: createInvoice,
      lookup,
      vouchedCodes: VOUCHED_CODES,
      // The call's window is its timeout plus the time to hear the answer (docs/contract.md §4.5).
      callWindowMs: callTimeoutMs + 500,
    }),
    invoicesFor: async (ref) => (await stats()).created[ref] ?? 0,
    totalInvoices: async () => Object.values((await stats()).created).reduce((sum, count) => sum + count, 0),
    createRequests: async (ref) => (await stats()).create_requests[ref] ?? 0,
    runWrites: async (runId) => {
      const { created, create_requests } = await stats();
      const ofRun = (counts: Record<string, number>) =>
        Object.entries(counts)
          .filter(([ref]) => ref.startsWith(`${runId}/`))
          .reduce((sum, [, count]) => sum + count, 0);
      return { requests: ofRun(create_requests), invoices: ofRun(created) };
    },
    fault: async (rule) => {
      const response = await fetch(`${provider.url}/__faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(rule),
      });
      if (!response.ok) throw new Error(`the provider refused the fault: ${response.status}`);
    },
    state: (ref) => runtime.getOperation(ref),
    eventTypes: async (ref) => (await runtime.getEvents(ref)).events.map((event) => event.type),
    grant: async (ref) => {
      const state = await runtime.getOperation(ref);
      await approver.recordApproval(ref, {
        decision: 'granted',
        approver: 'ops@acme.example',
        ...(state.approval_input_hash ? { input_hash: state.approval_input_hash } : {}),
      });
    },
    runtimeGrantStatus: async (ref) => {
      const response = await fetch(`${ledger.baseUrl}/v1/operations/${encodeURIComponent(ref)}/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNTIME_KEY}` },
        body: JSON.stringify({
          events: [
            {
              event_id: crypto.randomUUID(),
              type: 'ApprovalRecorded',
              data: { decision: 'granted', approver: 'the-agent-itself' },
            },
          ],
        }),
      });
      return response.status;
    },
    alwaysRateLimited: async (value, context) => {
      await world.fault({ fault: { kind: 'rate-limit', retry_after_s: 1 }, operation_ref: context.idempotencyKey });
      return createInvoice(value, context);
    },
    env: () => ({ AGENT_LEDGER_URL: ledger.baseUrl, AGENT_PROVIDER_URL: provider.url }),
    stop: async () => {
      const full = provider as Partial<ProviderProcess>;
      const process = ledger as Partial<LedgerProcess>;
      await full.stop?.();
      await process.stop?.();
      process.cleanup?.();
    },
  };
  return world;
}

/** In an agent script: the world the test started, from the env runAgentScript passes. */
export function agentWorldFromEnv(options: AgentWorldOptions = {}): AgentWorld {
  const ledgerUrl = process.env.AGENT_LEDGER_URL;
  const providerUrl = process.env.AGENT_PROVIDER_URL;
  if (!ledgerUrl || !providerUrl) throw new Error('AGENT_LEDGER_URL and AGENT_PROVIDER_URL must be set');
  return agentWorldAt({ baseUrl: ledgerUrl }, { url: providerUrl }, options);
}

/** The hash the ledger binds an approval to, for a test to compare. */
export function hashOf(input: unknown): string {
  return inputHash(input);
}

export interface AgentScript {
  child: ChildProcess;
  /** Every JSON line the script wrote on stdout so far. */
  lines(): Array<Record<string, unknown>>;
  output(): string;
  /** Waits for a line that satisfies `match`. */
  line(match: (line: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>>;
  /** The exit code (null after a signal). */
  exited: Promise<number | null>;
  /** SIGKILL: a crash, nothing in the script runs after it. */
  kill(): Promise<void>;
}

/**
 * Runs a TypeScript agent script (unbuilt, the way test/support/paused-feed-worker.ts runs) with the
 * world's env and `args`. The script talks over real HTTP and prints one JSON object per line.
 */
export function runAgentScript(script: string, world: AgentWorld, args: string[] = []): AgentScript {
  const child = spawn(
    process.execPath,
    ['--require', resolve(ROOT, 'test/chaos/swc-register.cjs'), resolve(ROOT, script), ...args],
    { cwd: ROOT, env: { ...process.env, ...world.env() }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  let errors = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (errors += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  const lines = () =>
    output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    child,
    lines,
    output: () => `${output}${errors ? `\n[stderr]\n${errors}` : ''}`,
    line: async (match, what) => {
      const found = await until(
        async () => lines().find(match) ?? (child.exitCode === null ? undefined : null),
        (value) => value !== undefined,
        `${what} (output: ${output}${errors})`,
        60_000,
      );
      if (!found) throw new Error(`the script exited before ${what}:\n${output}\n${errors}`);
      return found;
    },
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** In an agent script: one JSON line on stdout. */
export function emit(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
