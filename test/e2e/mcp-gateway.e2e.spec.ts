/**
 * The MCP gateway end to end, one describe block per subject: each needs real processes (the SDK's
 * client as the host, the built gateway CLI, the example invoice MCP server, the built ledger), and
 * some kill them. Each block keeps its own header, constants and hooks.
 */

import { type CallToolResult, CallToolResultSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { inputHash, LedgerClient } from '@recovery-ledger/client';
import { validateEnvelope } from '@recovery-ledger/core';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  invoiceGatewayConfig,
  startHost,
  workspace,
  type Host,
  type Workspace,
  CLI,
  INVOICE_SERVER,
} from '../support/mcp-gateway-harness';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InvoiceState, HOSTILE_TEXT } from '../../examples/invoice-mcp-server/invoice-state';
import { until, untilTrue } from '../support/until';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { McpGateway } from '../../packages/mcp-gateway/src/mcp-gateway';
import { parseGatewayConfig } from '../../packages/mcp-gateway/src/gateway-config';

/**
 * One ledger for the file, started once: these blocks need a ledger to record in, not a process of
 * their own to kill (the gateway, upstream and host they start are theirs alone). Each block has a
 * tenant of its own, since a gateway verifies at start whatever its tenant has in flight
 * (GET /v1/recovery, docs/mcp-gateway.md): in one tenant, a block's gateway would verify another
 * block's steps against its own upstream. A block's gateway carries its tenant's runtime key in its
 * configuration, and its approvals are recorded with the tenant's approver key. docs/mcp-gateway.md's
 * sample starts a local-mode ledger of its own, as the page prints it.
 */
const BLOCKS = ['contract', 'http', 'http-down', 'restart', 'tasks', 'window', 'prose', 'traces'] as const;
type Block = (typeof BLOCKS)[number];
// The block "a ledger that requires keys" reads its key from the environment, in tenant acme.
const KEYS_RUNTIME_KEY = 'rk_mcp_gateway_runtime_0123456789';
const keyOf = (block: Block, role: 'runtime' | 'approver') => `rk_mcp_${block}_${role}_0123456789`;
let sharedLedger: LedgerProcess;

beforeAll(async () => {
  const entries = BLOCKS.flatMap((block) =>
    (['runtime', 'approver'] as const).map((role) => `${keyOf(block, role)}:${role}:mcp-${block}`),
  );
  sharedLedger = await startLedger({
    env: { LEDGER_API_KEYS: [...entries, `${KEYS_RUNTIME_KEY}:runtime:acme`].join(',') },
  });
});

afterAll(async () => {
  await sharedLedger?.stop();
  sharedLedger?.cleanup();
});

/** The shared ledger as a block sees it: its tenant's clients, and its gateway configuration keyed for it. */
function blockLedger(block: Block) {
  const baseUrl = sharedLedger.baseUrl;
  return {
    process: sharedLedger,
    ledger: new LedgerClient({ baseUrl, apiKey: keyOf(block, 'runtime') }),
    approver: new LedgerClient({ baseUrl, apiKey: keyOf(block, 'approver') }),
    keyed: <T extends Record<string, unknown>>(config: T): T => {
      (config.ledger as { api_key?: string }).api_key = keyOf(block, 'runtime');
      return config;
    },
  };
}

describe('the contract table through the gateway', () => {
  /**
   * The article's contract table through the MCP gateway: the real MCP SDK client as the host, the
   * built CLI as the gateway (a process on stdio), the example invoice MCP server as the upstream (a
   * process the gateway starts), and the built ledger over real HTTP. What the model sees is what the
   * host's client returns; what the upstream saw is counted by the upstream itself.
   */
  // Longer than the call timeout, so a lookup right after a timeout is inside the window.
  const WINDOW_MS = 4000;
  const TIMEOUT_MS = 2000;
  const HOSTILE = /ignore|admin|password|suspend|SYSTEM|99999999/i;
  const waitPast = async (instant: string) => sleep(Math.max(0, Date.parse(instant) - Date.now()) + 60);

  describe('MCP gateway: the contract table through a real host, gateway, upstream and ledger', () => {
    let ledgerProcess: LedgerProcess;
    let ledger: LedgerClient;
    let space: Workspace;
    let host: Host;
    let approver: LedgerClient;
    let counter = 0;

    beforeAll(async () => {
      const shared = blockLedger('contract');
      ledgerProcess = shared.process;
      ledger = shared.ledger;
      approver = shared.approver;
      space = workspace();
      space.writeConfig(
        shared.keyed(
          invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
        ),
      );
      host = await startHost(space.configFile);
    });

    afterAll(async () => {
      await host?.close();
      space?.cleanup();
    });

    const nextRef = (label: string) => `run_mcp/${label}_${++counter}`;
    const invoice = (ref: string, extra: Record<string, unknown> = {}) => ({
      customer_id: `cus_${counter}`,
      amount_cents: 1200,
      currency: 'EUR',
      operation_ref: ref,
      ...extra,
    });

    /** The envelope the model got; it must be one the ledger itself would accept. */
    function envelopeOf(result: CallToolResult, ref: string): any {
      const envelope = result.structuredContent as any;
      expect(envelope).toBeDefined();
      const checked = validateEnvelope(envelope, { operationRef: ref, sideEffect: 'write' });
      if (!checked.ok) throw new Error(`not a valid envelope: ${JSON.stringify(checked)} ${JSON.stringify(envelope)}`);
      expect(HOSTILE.test(host.seen(result))).toBe(false);
      return envelope;
    }

    const create = (args: Record<string, unknown>) => host.call('create_invoice', args);
    const eventsOf = async (ref: string) => (await ledger.getEvents(ref)).events;

    it('tools/list: write tools take an operation_ref instead of the idempotency key; the gateway adds its two tools', async () => {
      const { tools } = await host.client.listTools();
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      const createTool = byName.create_invoice;
      expect(createTool.inputSchema.required).toEqual(
        expect.arrayContaining(['customer_id', 'amount_cents', 'currency', 'operation_ref']),
      );
      expect(Object.keys(createTool.inputSchema.properties ?? {})).not.toContain('idempotency_key');
      expect((createTool.inputSchema.properties as any).operation_ref.description).toMatch(
        /Reuse exactly the same operation_ref/,
      );
      expect(createTool.outputSchema).toMatchObject({ type: 'object' });
      expect(byName.get_invoice.inputSchema).toEqual({
        type: 'object',
        properties: { invoice_id: { type: 'string' } },
        required: ['invoice_id'],
        $schema: expect.any(String),
      });
      expect(byName.verify_operation.inputSchema.required).toEqual(['operation_ref']);
      expect(byName.operation_status).toBeDefined();
    });

    it('a write without operation_ref is answered with what to fix, and nothing is sent', async () => {
      const before = space.state.calls().create_invoice?.total ?? 0;
      const result = await create({ customer_id: 'cus_1', amount_cents: 100, currency: 'EUR' });
      expect(result.isError).toBe(true);
      expect((result.content as any)[0].text).toMatch(/needs operation_ref/);
      expect(space.state.calls().create_invoice?.total ?? 0).toBe(before);
    });

    it('invalid input: not_committed, correct_input naming the field; no unchanged retry', async () => {
      const ref = nextRef('invalid');
      const first = envelopeOf(await create(invoice(ref, { customer_id: 'not a customer' })), ref);
      expect(first).toMatchObject({
        ok: false,
        code: 'INVALID_CUSTOMER',
        commit_state: 'not_committed',
        next_action: 'correct_input',
        safe_details: { field: 'customer_id' },
      });

      const unchanged = envelopeOf(await create(invoice(ref, { customer_id: 'not a customer' })), ref);
      expect(unchanged).toMatchObject({
        code: 'UNCHANGED_RETRY',
        next_action: 'correct_input',
        commit_state: 'not_committed',
      });
      expect(space.createCalls(ref)).toBe(1);

      const fixed = envelopeOf(await create(invoice(ref, { customer_id: 'cus_fixed' })), ref);
      expect(fixed).toMatchObject({
        ok: true,
        commit_state: 'committed',
        result: { invoice: { customer_id: 'cus_fixed' } },
      });
      expect(space.createCalls(ref)).toBe(2);
      expect(space.invoicesFor(ref)).toBe(1);
    });

    it('read endpoint rate limit: the small envelope with wait_and_retry; the read runs only after not_before', async () => {
      const target = nextRef('to_read');
      const created = envelopeOf(await create(invoice(target)), target);
      const id = created.result.invoice.id as string;
      space.fault({ on: 'read', fault: { kind: 'rate-limit', retry_after_ms: 700 } });
      const reads = () => space.state.calls().get_invoice?.total ?? 0;
      const before = reads();

      const limited = await host.call('get_invoice', { invoice_id: id });
      expect(limited.isError).toBe(true);
      const small = limited.structuredContent as any;
      expect(small).toMatchObject({
        ok: false,
        code: 'RATE_LIMITED',
        next_action: 'wait_and_retry',
        retry: { directive: 'after_delay' },
      });
      expect(small.commit_state).toBeUndefined();

      const early = await host.call('get_invoice', { invoice_id: id });
      expect(early.structuredContent).toMatchObject({ code: 'RETRY_NOT_BEFORE', next_action: 'wait_and_retry' });
      expect(reads()).toBe(before + 1);

      await waitPast(small.retry.not_before);
      const later = await host.call('get_invoice', { invoice_id: id });
      expect(later.isError).toBeFalsy();
      expect(later.structuredContent).toMatchObject({ invoice: { id } });
      expect(reads()).toBe(before + 2);
    });

    it('write rate limit: wait_and_retry; a call before not_before is refused without reaching the upstream', async () => {
      const ref = nextRef('write_limited');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'rate-limit', retry_after_ms: 700 } });
      const limited = envelopeOf(await create(invoice(ref)), ref);
      expect(limited).toMatchObject({
        code: 'RATE_LIMITED',
        commit_state: 'not_committed',
        next_action: 'wait_and_retry',
      });
      const early = envelopeOf(await create(invoice(ref)), ref);
      expect(early).toMatchObject({
        code: 'RETRY_NOT_BEFORE',
        next_action: 'wait_and_retry',
        retry: { not_before: limited.retry.not_before },
      });
      expect(space.createCalls(ref)).toBe(1);
      await waitPast(limited.retry.not_before);
      expect(envelopeOf(await create(invoice(ref)), ref)).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(2);
    });

    it('write timeout after the provider committed: unknown, then verified by operation_ref; the model sees the proven success', async () => {
      const ref = nextRef('timeout_committed');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
      const answer = envelopeOf(await create(invoice(ref)), ref);
      const [stored] = space.state.invoices().filter((item) => item.operation_ref === ref);
      expect(answer).toMatchObject({ ok: true, commit_state: 'committed', verification: { evidence_ref: stored.id } });
      expect(space.createCalls(ref)).toBe(1);
      const events = await eventsOf(ref);
      const envelope = events.find((event) => event.type === 'EnvelopeRecorded')?.data.envelope as any;
      expect(envelope).toMatchObject({
        code: 'OUTCOME_UNKNOWN',
        commit_state: 'unknown',
        next_action: 'verify_operation',
      });
      expect(events.find((event) => event.type === 'VerificationRecorded')?.data).toMatchObject({
        outcome: 'found_committed',
        evidence_ref: stored.id,
      });

      // The model calling again gets the same success: the step is settled, nothing is sent.
      expect(envelopeOf(await create(invoice(ref)), ref)).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(1);
    });

    it('write timeout before anything committed: verify_operation; nothing is sent again before the window ends, then one attempt with the same key', async () => {
      const ref = nextRef('timeout_lost');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
      const unknown = envelopeOf(await create(invoice(ref)), ref);
      expect(unknown).toMatchObject({
        ok: false,
        commit_state: 'unknown',
        next_action: 'verify_operation',
        retry: { directive: 'never' },
      });
      expect(unknown.retry.not_before).toBeDefined();

      const again = envelopeOf(await create(invoice(ref)), ref);
      expect(again).toMatchObject({ commit_state: 'unknown', next_action: 'verify_operation' });
      const checked = envelopeOf(await host.call('verify_operation', { operation_ref: ref }), ref);
      expect(checked).toMatchObject({ code: 'VERIFICATION_PREMATURE', next_action: 'verify_operation' });
      expect(space.createCalls(ref)).toBe(1);

      const status = await host.call('operation_status', { operation_ref: ref });
      expect(status.structuredContent).toMatchObject({
        operation_ref: ref,
        tool: 'create_invoice',
        status: 'verifying',
        next_action: 'verify_operation',
      });

      await waitPast(unknown.retry.not_before);
      const retried = envelopeOf(await create(invoice(ref)), ref);
      expect(retried).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(2);
      expect(space.invoicesFor(ref)).toBe(1);
      const types = (await eventsOf(ref)).map((event) => event.type);
      // The second dispatch came only after a not_found was recorded past the window.
      const notFound = (await eventsOf(ref)).findIndex(
        (event) => event.type === 'VerificationRecorded' && event.data.outcome === 'not_found',
      );
      const dispatches = types
        .map((type, index) => (type === 'AttemptDispatched' ? index : -1))
        .filter((index) => index >= 0);
      expect(dispatches).toHaveLength(2);
      expect(notFound).toBeGreaterThan(dispatches[0]);
      expect(notFound).toBeLessThan(dispatches[1]);
    });

    it('duplicate operation key: the original success is answered and the upstream is not called again', async () => {
      const ref = nextRef('duplicate');
      const first = envelopeOf(await create(invoice(ref)), ref);
      const second = envelopeOf(await create(invoice(ref)), ref);
      expect(second).toMatchObject({ ok: true, result: first.result });
      expect(space.createCalls(ref)).toBe(1);
      const refused = (await eventsOf(ref))
        .filter((event) => event.type === 'DispatchRefused')
        .map((event) => event.data.code);
      expect(refused).toEqual(['DUPLICATE_PREVENTED']);

      // The same ref for another input is another operation: the model is told to pick a new ref.
      const other = envelopeOf(await create(invoice(ref, { amount_cents: 999 })), ref);
      expect(other).toMatchObject({
        code: 'OPERATION_REF_REUSED',
        next_action: 'correct_input',
        safe_details: { field: 'operation_ref' },
      });
      expect(space.createCalls(ref)).toBe(1);
    });

    it('two calls of one operation at once: one reaches the upstream, the other is told the attempt is in flight', async () => {
      const ref = nextRef('concurrent');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'slow', delay_ms: 600 } });
      const [a, b] = await Promise.all([create(invoice(ref)), create(invoice(ref))]);
      const answers = [envelopeOf(a, ref), envelopeOf(b, ref)];
      expect(answers.filter((answer) => answer.ok)).toHaveLength(1);
      expect(answers.find((answer) => !answer.ok)).toMatchObject({
        code: 'ATTEMPT_IN_FLIGHT',
        commit_state: 'unknown',
        next_action: 'verify_operation',
      });
      expect(space.createCalls(ref)).toBe(1);
      expect(envelopeOf(await create(invoice(ref)), ref)).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(1);
    });

    it('lost approval: not_committed, request_approval; the tool is not invoked again until a person approves', async () => {
      const ref = nextRef('approval');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'forbidden' } });
      const asked = envelopeOf(await create(invoice(ref)), ref);
      expect(asked).toMatchObject({
        code: 'MISSING_APPROVAL',
        category: 'authorization',
        commit_state: 'not_committed',
        next_action: 'request_approval',
      });
      const again = envelopeOf(await create(invoice(ref)), ref);
      expect(again).toMatchObject({ code: 'APPROVAL_REQUIRED', next_action: 'request_approval' });
      expect(space.createCalls(ref)).toBe(1);

      await approver.recordApproval(ref, { decision: 'granted', approver: 'alice' });
      expect(envelopeOf(await create(invoice(ref)), ref)).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(2);
    });

    it('a tool whose policy needs approval: nothing reaches the upstream before a person approves', async () => {
      const target = nextRef('to_void');
      const id = envelopeOf(await create(invoice(target)), target).result.invoice.id;
      const ref = nextRef('void');
      const voids = () => space.state.calls().void_invoice?.by_operation_ref[ref] ?? 0;
      const asked = envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref);
      expect(asked).toMatchObject({
        code: 'POLICY_REQUIRES_APPROVAL',
        next_action: 'request_approval',
        commit_state: 'not_committed',
      });
      expect(envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref)).toMatchObject({
        code: 'APPROVAL_REQUIRED',
      });
      expect(voids()).toBe(0);

      await approver.recordApproval(ref, { decision: 'granted', approver: 'alice' });
      const done = envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref);
      expect(done).toMatchObject({ ok: true, result: { invoice: { id, status: 'void' } } });
      expect(voids()).toBe(1);
    });

    it('an approval is for the input it was asked for: after a validation error, other arguments need a new approval', async () => {
      const target = nextRef('to_void');
      const id = envelopeOf(await create(invoice(target)), target).result.invoice.id;
      const ref = nextRef('void_bound');
      const voids = () => space.state.calls().void_invoice?.by_operation_ref[ref] ?? 0;
      // Approved for an invoice id that does not exist: the upstream refuses it as input to correct.
      expect(
        envelopeOf(await host.call('void_invoice', { invoice_id: 'inv_missing', operation_ref: ref }), ref),
      ).toMatchObject({ code: 'POLICY_REQUIRES_APPROVAL' });
      await approver.recordApproval(ref, { decision: 'granted', approver: 'alice' });
      const invalid = envelopeOf(
        await host.call('void_invoice', { invoice_id: 'inv_missing', operation_ref: ref }),
        ref,
      );
      expect(invalid).toMatchObject({
        code: 'INVOICE_NOT_FOUND',
        next_action: 'correct_input',
        safe_details: { field: 'invoice_id' },
      });
      expect(voids()).toBe(1);

      // The corrected call is another input: alice approved the first one, not this one.
      const corrected = envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref);
      expect(corrected).toMatchObject({
        code: 'APPROVAL_REQUIRED',
        next_action: 'request_approval',
        commit_state: 'not_committed',
      });
      expect(voids()).toBe(1);
      const state = await ledger.getOperation(ref);
      expect(state).toMatchObject({ status: 'awaiting_approval', approval_input_hash: inputHash({ invoice_id: id }) });
      // Asked again, it is still that approval the call waits for, not another operation's reference.
      expect(envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref)).toMatchObject({
        code: 'APPROVAL_REQUIRED',
      });

      await approver.recordApproval(ref, { decision: 'granted', approver: 'alice' });
      const done = envelopeOf(await host.call('void_invoice', { invoice_id: id, operation_ref: ref }), ref);
      expect(done).toMatchObject({ ok: true, result: { invoice: { id, status: 'void' } } });
      expect(voids()).toBe(2);
    });

    it('repeated provider outage: bounded dependency errors, then terminal escalation', async () => {
      const ref = nextRef('outage');
      space.fault({ on: 'create', operation_ref: ref, times: 10, fault: { kind: 'outage', retry_after_ms: 150 } });
      const answers: any[] = [];
      for (let attempt = 1; attempt <= 3; attempt++) {
        const answer = envelopeOf(await create(invoice(ref)), ref);
        answers.push(answer);
        if (answer.retry.not_before) await waitPast(answer.retry.not_before);
      }
      expect(answers[0]).toMatchObject({
        code: 'PROVIDER_OUTAGE',
        category: 'dependency',
        commit_state: 'not_committed',
        next_action: 'wait_and_retry',
      });
      expect(answers[2]).toMatchObject({ next_action: 'escalate', commit_state: 'not_committed' });
      expect(['ATTEMPTS_EXHAUSTED', 'DEPENDENCY_FAILURES_EXHAUSTED']).toContain(answers[2].code);
      const after = envelopeOf(await create(invoice(ref)), ref);
      expect(after).toMatchObject({ next_action: 'escalate' });
      expect(space.createCalls(ref)).toBe(3);
      expect((await ledger.getOperation(ref)).status).toBe('escalated');
    });

    it('hostile upstream text never reaches the host, nor the ledger', async () => {
      const textRef = nextRef('hostile_text');
      space.fault({ on: 'create', operation_ref: textRef, fault: { kind: 'hostile-text' } });
      const textAnswer = envelopeOf(await create(invoice(textRef)), textRef);
      // Prose proves nothing about a write: unknown, and verified before anything else.
      expect(textAnswer).toMatchObject({ commit_state: 'unknown', next_action: 'verify_operation' });

      const envelopeRef = nextRef('hostile_envelope');
      space.fault({ on: 'create', operation_ref: envelopeRef, fault: { kind: 'hostile-envelope' } });
      const envelopeAnswer = envelopeOf(await create(invoice(envelopeRef)), envelopeRef);
      expect(envelopeAnswer).toMatchObject({ code: 'UPSTREAM_ERROR', next_action: 'correct_input', safe_details: {} });

      space.fault({ on: 'read', fault: { kind: 'hostile-text' } });
      const read = await host.call('get_invoice', { invoice_id: 'inv_x' });
      expect(read.isError).toBe(true);
      expect(read.structuredContent).toMatchObject({ code: 'UPSTREAM_ERROR' });
      expect(HOSTILE.test(host.seen(read))).toBe(false);

      for (const ref of [textRef, envelopeRef]) expect(HOSTILE.test(JSON.stringify(await eventsOf(ref)))).toBe(false);
      expect(space.createCalls(textRef)).toBe(1);
      expect(space.createCalls(envelopeRef)).toBe(1);
    });

    it('upstream crash after the commit: unknown; the gateway restarts the upstream and proves the write by lookup', async () => {
      const ref = nextRef('crash_committed');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'crash', after_commit: true } });
      const answer = envelopeOf(await create(invoice(ref)), ref);
      expect(answer).toMatchObject({ ok: true, verification: { evidence_ref: expect.stringMatching(/^inv_/) } });
      expect(space.createCalls(ref)).toBe(1);
      expect(space.invoicesFor(ref)).toBe(1);

      const next = nextRef('after_crash');
      expect(envelopeOf(await create(invoice(next)), next)).toMatchObject({ ok: true });
    });

    it('upstream crash before the commit: left for verification, never retried blind', async () => {
      const ref = nextRef('crash_lost');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'crash' } });
      const answer = envelopeOf(await create(invoice(ref)), ref);
      expect(answer).toMatchObject({ commit_state: 'unknown', next_action: 'verify_operation' });
      expect(envelopeOf(await create(invoice(ref)), ref)).toMatchObject({ next_action: 'verify_operation' });
      expect(space.createCalls(ref)).toBe(1);
      expect(space.invoicesFor(ref)).toBe(0);
    });
  });
});

describe("docs/mcp-gateway.md's sample, run as printed", () => {
  /**
   * docs/mcp-gateway.md's host configuration and configuration file, run as printed: both are read
   * out of the page, the checkout's path put for `/home/me/recovery-ledger` and a temporary
   * directory for `/home/me/invoices`, and the host's command started by the SDK's client against
   * the built ledger in local mode (no key anywhere) and the example invoice MCP server. And a
   * gateway that cannot start says why to the host, in the answer to its initialize.
   */
  const ROOT = resolve(__dirname, '../..');
  const DOC = readFileSync(join(ROOT, 'docs/mcp-gateway.md'), 'utf8');

  /** The first ```json block after a heading of the page. */
  function jsonAfter(heading: string): string {
    const section = DOC.slice(DOC.indexOf(heading));
    const block = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
    if (!block) throw new Error(`no JSON block after ${heading}`);
    return block;
  }

  describe('MCP gateway: the configuration in docs/mcp-gateway.md, run as printed against a local-mode ledger', () => {
    let ledgerProcess: LedgerProcess;
    let dir: string;
    let state: InvoiceState;
    let client: Client;
    let stderr = '';

    beforeAll(async () => {
      // Local mode: no LEDGER_API_KEYS for the ledger, no LEDGER_API_KEY for the gateway.
      ledgerProcess = await startLedger();
      dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-doc-'));
      state = new InvoiceState(join(dir, 'invoices'));
      const configFile = join(dir, 'gateway.json');
      const place = (text: string) =>
        text
          .replaceAll('/home/me/recovery-ledger/gateway.json', configFile)
          .replaceAll('/home/me/recovery-ledger', ROOT)
          .replaceAll('/home/me/invoices', state.dir);
      writeFileSync(configFile, place(jsonAfter('## The configuration file')));
      const server = JSON.parse(place(jsonAfter('## Host configuration'))).mcpServers.invoices as {
        command: string;
        args: string[];
        env?: Record<string, string>;
      };
      expect(server.env).toBeUndefined();

      const transport = new StdioClientTransport({
        command: server.command,
        args: server.args,
        // The page's ledger is npm start's 127.0.0.1:3000; this one listens elsewhere (the documented override).
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LEDGER_URL: ledgerProcess.baseUrl },
        stderr: 'pipe',
      });
      (transport.stderr as PassThrough | null)?.on('data', (chunk) => (stderr += chunk));
      client = new Client({ name: 'doc-host', version: '1.0.0' });
      await client.connect(transport);
    });

    afterAll(async () => {
      await client?.close();
      await ledgerProcess?.stop();
      ledgerProcess?.cleanup();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const call = async (name: string, args: Record<string, unknown>) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult;

    it('starts without a key, lists the tools with the words the configuration gives, and a write succeeds', async () => {
      expect(stderr).toContain('"ledger_key":"none"');
      const { tools } = await client.listTools();
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      expect(Object.keys(byName)).toEqual(
        expect.arrayContaining([
          'create_invoice',
          'void_invoice',
          'get_invoice',
          'lookup_operation',
          'verify_operation',
          'operation_status',
        ]),
      );
      expect(byName.create_invoice).toMatchObject({
        title: 'Create an invoice',
        description: expect.stringMatching(/^Creates an invoice for a customer: customer_id like cus_42/),
      });
      expect(byName.get_invoice).toMatchObject({
        title: 'Read an invoice',
        description: 'Reads one invoice by its id (inv_…).',
      });

      const answer = await call('create_invoice', {
        customer_id: 'cus_42',
        amount_cents: 1250,
        currency: 'EUR',
        operation_ref: 'task_1/invoice_1',
      });
      expect(answer.structuredContent).toMatchObject({
        ok: true,
        commit_state: 'committed',
        result: { invoice: { operation_ref: 'task_1/invoice_1' } },
      });
      expect(state.invoices()).toHaveLength(1);
    });

    it('a provider outage reaches the model as the page says: the sample vouches for PROVIDER_OUTAGE', async () => {
      state.addFault({
        on: 'create',
        operation_ref: 'task_1/invoice_2',
        fault: { kind: 'outage', retry_after_ms: 200 },
      });
      const answer = await call('create_invoice', {
        customer_id: 'cus_42',
        amount_cents: 1250,
        currency: 'EUR',
        operation_ref: 'task_1/invoice_2',
      });
      expect(answer.structuredContent).toMatchObject({
        ok: false,
        code: 'PROVIDER_OUTAGE',
        category: 'dependency',
        commit_state: 'not_committed',
        next_action: 'wait_and_retry',
      });
      // The page shows this answer's first line, from a real run: the same words, up to the instant.
      const line = (answer.content as Array<{ text: string }>)[0].text.split('\n')[0];
      expect(DOC).toContain(line.slice(0, line.indexOf(' not_before=')));
    });
  });

  describe('MCP gateway: a gateway that cannot start says why, to the host and on stderr', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-nostart-'));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    // A ledger on another machine with its key variable unset: the one mistake that still stops a start.
    const configFile = () => {
      const config = JSON.parse(jsonAfter('## The configuration file'));
      config.ledger.url = 'http://ledger.example.internal:3000';
      const file = join(dir, 'remote.json');
      writeFileSync(file, JSON.stringify(config));
      return file;
    };
    const reason = 'ledger.api_key_env: environment variable LEDGER_API_KEY is not set';

    it("the host's initialize is answered with a JSON-RPC error carrying the reason", async () => {
      const client = new Client({ name: 'e2e-host', version: '1.0.0' });
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [CLI, 'mcp-gateway', '--config', configFile()],
        env: { PATH: process.env.PATH ?? '' },
        stderr: 'ignore',
      });
      try {
        await expect(client.connect(transport)).rejects.toThrow(reason);
      } finally {
        await transport.close().catch(() => undefined);
      }
    });

    it('the process prints it on stderr and exits non-zero', () => {
      const initialize = {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      };
      const result = spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', configFile()], {
        encoding: 'utf8',
        input: `${JSON.stringify(initialize)}\n`,
        timeout: 20_000,
        env: { PATH: process.env.PATH ?? '' },
      });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain(reason);
      expect(JSON.parse(result.stdout.trim())).toMatchObject({
        jsonrpc: '2.0',
        id: 0,
        error: { code: -32603, message: expect.stringContaining(reason) },
      });
    });
  });
});

describe('an upstream over streamable HTTP, and the configuration refused', () => {
  /**
   * The gateway with an upstream reached over streamable HTTP (the invoice MCP server in --http
   * mode, a real process on loopback) and an HTTP lookup URL template; and the configuration file
   * refused, with every mistake named, before anything starts.
   */
  describe('MCP gateway: a streamable HTTP upstream and an HTTP lookup', () => {
    let ledgerProcess: LedgerProcess;
    let ledger: LedgerClient;
    let space: Workspace;
    let upstream: ChildProcess;
    let host: Host;
    let baseUrl: string;

    beforeAll(async () => {
      const shared = blockLedger('http');
      ledgerProcess = shared.process;
      ledger = shared.ledger;
      space = workspace();
      upstream = spawn(process.execPath, [INVOICE_SERVER, '--state-dir', space.stateDir, '--http'], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const urlFile = join(space.stateDir, 'http-url');
      // The server writes the file once it listens; it may be seen empty for an instant before its content lands.
      for (let waited = 0; !existsSync(urlFile) || readFileSync(urlFile, 'utf8') === ''; waited += 25) {
        if (waited > 15_000) throw new Error('the invoice server did not start');
        await sleep(25);
      }
      baseUrl = readFileSync(urlFile, 'utf8');
      const config = shared.keyed(
        invoiceGatewayConfig(space, {
          ledgerUrl: ledgerProcess.baseUrl,
          windowMs: 3000,
          timeoutMs: 1500,
        }),
      ) as any;
      config.servers = { invoices: { url: `${baseUrl}/mcp` } };
      config.write_tools.create_invoice.lookup = { url: `${baseUrl}/lookup?operation_ref={operation_ref}` };
      space.writeConfig(config);
      host = await startHost(space.configFile);
    });

    afterAll(async () => {
      await host?.close();
      upstream?.kill('SIGTERM');
      space?.cleanup();
    });

    const create = (ref: string) =>
      host.call('create_invoice', { customer_id: 'cus_9', amount_cents: 900, currency: 'EUR', operation_ref: ref });
    const httpLookups = (ref: string) => space.state.calls().http_lookup?.by_operation_ref[ref] ?? 0;

    it('a write succeeds through the HTTP upstream', async () => {
      const answer = await create('run_http/ok');
      expect(answer.structuredContent).toMatchObject({
        ok: true,
        result: { invoice: { operation_ref: 'run_http/ok' } },
      });
      expect(space.createCalls('run_http/ok')).toBe(1);
    });

    it('a timeout after the commit is proven by the HTTP lookup', async () => {
      const ref = 'run_http/timeout';
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
      const answer = await create(ref);
      const invoice = space.state.invoices().find((item) => item.operation_ref === ref);
      expect(answer.structuredContent).toMatchObject({ ok: true, verification: { evidence_ref: invoice?.id } });
      expect(httpLookups(ref)).toBe(1);
      expect(space.createCalls(ref)).toBe(1);
    });

    it('an unavailable lookup escalates: the outcome stays unknown to the model, and nothing is sent again', async () => {
      const ref = 'run_http/unverifiable';
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
      space.fault({ on: 'lookup', operation_ref: ref, fault: { kind: 'lookup-unavailable' } });
      const answer = await create(ref);
      expect(answer.structuredContent).toMatchObject({
        ok: false,
        code: 'LOOKUP_UNAVAILABLE',
        commit_state: 'unknown',
        next_action: 'verify_operation',
      });
      expect((await ledger.getOperation(ref)).status).toBe('escalated');
      const again = await create(ref);
      expect(again.structuredContent).toMatchObject({ code: 'LOOKUP_UNAVAILABLE', commit_state: 'unknown' });
      expect(space.createCalls(ref)).toBe(1);
    });
  });

  describe('MCP gateway: an HTTP upstream that is down', () => {
    let ledgerProcess: LedgerProcess;
    let space: Workspace;
    let host: Host;
    let upstream: ChildProcess;

    beforeAll(async () => {
      const shared = blockLedger('http-down');
      ledgerProcess = shared.process;
      space = workspace();
      upstream = spawn(process.execPath, [INVOICE_SERVER, '--state-dir', space.stateDir, '--http'], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const urlFile = join(space.stateDir, 'http-url');
      // The server writes the file once it listens; it may be seen empty for an instant before its content lands.
      for (let waited = 0; !existsSync(urlFile) || readFileSync(urlFile, 'utf8') === ''; waited += 25) {
        if (waited > 15_000) throw new Error('the invoice server did not start');
        await sleep(25);
      }
      const baseUrl = readFileSync(urlFile, 'utf8');
      const config = shared.keyed(
        invoiceGatewayConfig(space, {
          ledgerUrl: ledgerProcess.baseUrl,
          windowMs: 5000,
          timeoutMs: 1500,
        }),
      ) as any;
      config.servers = { invoices: { url: `${baseUrl}/mcp` } };
      space.writeConfig(config);
      host = await startHost(space.configFile);
    });

    afterAll(async () => {
      await host?.close();
      upstream?.kill('SIGKILL');
      space?.cleanup();
    });

    it('a refused connection is known not to have sent anything: wait_and_retry, not a verification', async () => {
      upstream.kill('SIGTERM');
      await new Promise((resolve) => upstream.once('exit', resolve));
      const ref = 'run_down/one';
      const answer = await host.call('create_invoice', {
        customer_id: 'cus_1',
        amount_cents: 100,
        currency: 'EUR',
        operation_ref: ref,
      });
      expect(answer.structuredContent).toMatchObject({
        ok: false,
        code: 'NETWORK_UNREACHABLE',
        commit_state: 'not_committed',
        next_action: 'wait_and_retry',
      });
      expect(space.createCalls(ref)).toBe(0);
    });
  });

  describe('MCP gateway: a ledger that requires keys', () => {
    const RUNTIME_KEY = KEYS_RUNTIME_KEY;
    let ledgerProcess: LedgerProcess;
    let space: Workspace;
    const hosts: Host[] = [];

    beforeAll(async () => {
      // The shared ledger, which holds this key for tenant acme.
      ledgerProcess = sharedLedger;
      space = workspace();
      const config = invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl }) as any;
      config.ledger.api_key_env = 'INVOICES_LEDGER_KEY';
      space.writeConfig(config);
    });

    afterAll(async () => {
      for (const host of hosts) await host.close();
      space?.cleanup();
    });

    it("with its key from the environment, writes are recorded in the key's tenant", async () => {
      const host = await startHost(space.configFile, { INVOICES_LEDGER_KEY: RUNTIME_KEY });
      hosts.push(host);
      const answer = await host.call('create_invoice', {
        customer_id: 'cus_1',
        amount_cents: 100,
        currency: 'EUR',
        operation_ref: 'run_keys/one',
      });
      expect(answer.structuredContent).toMatchObject({ ok: true });
      const ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl, apiKey: RUNTIME_KEY });
      expect((await ledger.getOperation('run_keys/one')).status).toBe('succeeded');
    });

    it('with a wrong key nothing is sent, and the model is told to stop, not to retry', async () => {
      const host = await startHost(space.configFile, { INVOICES_LEDGER_KEY: 'rk_wrong_key_000000000000' });
      hosts.push(host);
      const answer = await host.call('create_invoice', {
        customer_id: 'cus_1',
        amount_cents: 100,
        currency: 'EUR',
        operation_ref: 'run_keys/two',
      });
      expect(answer.structuredContent).toMatchObject({
        ok: false,
        code: 'LEDGER_UNAUTHORIZED',
        next_action: 'escalate',
        commit_state: 'not_committed',
      });
      expect(space.createCalls('run_keys/two')).toBe(0);
    });
  });

  describe('MCP gateway: the configuration file', () => {
    let space: Workspace;
    beforeAll(() => {
      space = workspace();
    });
    afterAll(() => space?.cleanup());

    const runGateway = (config: unknown) => {
      const file = join(space.dir, 'bad.json');
      writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
      return spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', file], {
        encoding: 'utf8',
        input: '',
        timeout: 20_000,
      });
    };

    it('a broken file exits 2 naming every field that is wrong, and starts nothing', () => {
      const result = runGateway({
        ledger: { url: 'ftp://ledger' },
        servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', space.stateDir] } },
        write_tools: {
          create_invoice: {
            lookup: { url: 'http://127.0.0.1:1/lookup' },
            vouched_codes: ['not a code'],
            policy: { max_attempts: 0 },
          },
          verify_operation: { lookup: { tool: 'x' } },
        },
        surprise: true,
      });
      expect(result.status).toBe(2);
      for (const expected of [
        'ledger.url: must be an http(s) URL',
        'write_tools.create_invoice.lookup',
        'write_tools.create_invoice.vouched_codes[0]: must be an UPPER_SNAKE_CASE code',
        'write_tools.create_invoice.policy.max_attempts',
        'surprise',
      ]) {
        expect(result.stderr).toContain(expected);
      }
      expect(space.state.calls()).toEqual({});
    });

    it('semantic mistakes are named too: a gateway tool name, a lookup that writes, an unknown server', () => {
      const result = runGateway({
        servers: { invoices: { command: 'node' } },
        write_tools: {
          verify_operation: { lookup: { tool: 'lookup_operation' } },
          create_invoice: { server: 'elsewhere', lookup: { tool: 'void_invoice' } },
          void_invoice: { lookup: { tool: 'lookup_operation' } },
        },
      });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain('write_tools.verify_operation: verify_operation is a tool of the gateway itself');
      expect(result.stderr).toContain('write_tools.create_invoice.server: no server named elsewhere');
      expect(result.stderr).toContain(
        'write_tools.create_invoice.lookup.tool: void_invoice is a write tool; a lookup must only read',
      );
    });

    it('not JSON, or a write tool no upstream has: a clear one-line reason', () => {
      const notJson = runGateway('{ "servers": ');
      expect(notJson.status).toBe(2);
      expect(notJson.stderr).toMatch(/not JSON/);

      const missing = runGateway({
        servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', space.stateDir] } },
        write_tools: { send_email: { lookup: { tool: 'lookup_operation' } } },
      });
      expect(missing.status).toBe(3);
      expect(missing.stderr).toContain('write tool send_email is listed by no upstream server');
    });
  });
});

describe('the gateway killed mid-write and restarted', () => {
  /**
   * The gateway killed (SIGKILL) in the middle of a write and started again: the new process asks
   * the ledger what was in flight (GET /v1/recovery) and verifies it by the same operation_ref
   * before anything is sent again. Real processes throughout: host client, gateway CLI, invoice MCP
   * server, ledger.
   */
  // This block's until is untilTrue (a condition polled until it holds), as its file imported it.
  const until = untilTrue;
  const WINDOW_MS = 12_000;
  // The call is still open upstream when the gateway dies; the window must outlast it (the gateway refuses otherwise).
  const TIMEOUT_MS = 4000;

  describe('MCP gateway: killed mid-call and restarted, it verifies instead of re-sending', () => {
    let ledgerProcess: LedgerProcess;
    let ledger: LedgerClient;
    let space: Workspace;
    const hosts: Host[] = [];

    beforeAll(async () => {
      const shared = blockLedger('restart');
      ledgerProcess = shared.process;
      ledger = shared.ledger;
      space = workspace();
      space.writeConfig(
        shared.keyed(
          invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
        ),
      );
    });

    afterAll(async () => {
      for (const host of hosts) await host.close().catch(() => undefined);
      space?.cleanup();
    });

    async function host(): Promise<Host> {
      const started = await startHost(space.configFile);
      hosts.push(started);
      return started;
    }

    /** Starts a create through a first gateway, waits until the upstream has it, and SIGKILLs the gateway. */
    async function killMidCall(ref: string): Promise<void> {
      const first = await host();
      const pending = first.call('create_invoice', {
        customer_id: 'cus_7',
        amount_cents: 700,
        currency: 'EUR',
        operation_ref: ref,
      });
      pending.catch(() => undefined);
      await until('the upstream to receive the create', () => space.createCalls(ref) === 1);
      await until(
        'the ledger to show the attempt in flight',
        async () => (await ledger.getOperation(ref)).status === 'dispatched',
      );
      process.kill(first.pid, 'SIGKILL');
      await expect(pending).rejects.toThrow();
    }

    const dispatches = async (ref: string) =>
      (await ledger.getEvents(ref)).events.filter((event) => event.type === 'AttemptDispatched').length;

    it('the write had committed: the restarted gateway proves it by lookup, and the model gets that success without a second send', async () => {
      const ref = 'run_restart/committed';
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
      await killMidCall(ref);
      expect(space.invoicesFor(ref)).toBe(1);

      const second = await host();
      await until('recovery to settle the step', async () => (await ledger.getOperation(ref)).status === 'succeeded');
      const events = (await ledger.getEvents(ref)).events;
      const invoice = space.state.invoices().find((item) => item.operation_ref === ref);
      expect(events.find((event) => event.type === 'VerificationRecorded')?.data).toMatchObject({
        outcome: 'found_committed',
        evidence_ref: invoice?.id,
      });
      expect(second.stderr()).toContain('"event":"recovered"');

      const answer = await second.call('create_invoice', {
        customer_id: 'cus_7',
        amount_cents: 700,
        currency: 'EUR',
        operation_ref: ref,
      });
      expect(answer.structuredContent).toMatchObject({
        ok: true,
        operation_ref: ref,
        verification: { evidence_ref: invoice?.id },
      });
      expect(space.createCalls(ref)).toBe(1);
      expect(await dispatches(ref)).toBe(1);
    });

    it('the write had not committed: nothing is sent before a not_found past the window, and then only with the same operation_ref', async () => {
      const ref = 'run_restart/lost';
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
      await killMidCall(ref);

      const second = await host();
      await second.client.listTools();
      const early = await second.call('create_invoice', {
        customer_id: 'cus_7',
        amount_cents: 700,
        currency: 'EUR',
        operation_ref: ref,
      });
      const envelope = early.structuredContent as any;
      expect(envelope).toMatchObject({ ok: false, commit_state: 'unknown', next_action: 'verify_operation' });
      expect(space.createCalls(ref)).toBe(1);
      expect(await dispatches(ref)).toBe(1);

      await sleep(Math.max(0, Date.parse(envelope.retry.not_before) - Date.now()) + 100);
      const later = await second.call('create_invoice', {
        customer_id: 'cus_7',
        amount_cents: 700,
        currency: 'EUR',
        operation_ref: ref,
      });
      expect(later.structuredContent).toMatchObject({ ok: true });
      // The second send carried the same key: the upstream counts both under this one operation_ref.
      expect(space.createCalls(ref)).toBe(2);
      expect(space.invoicesFor(ref)).toBe(1);
      const events = (await ledger.getEvents(ref)).events.map((event) =>
        event.type === 'VerificationRecorded' ? `${event.type}:${event.data.outcome}` : event.type,
      );
      expect(events.indexOf('VerificationRecorded:not_found')).toBeLessThan(events.lastIndexOf('AttemptDispatched'));
      expect(events.filter((type) => type === 'AttemptDispatched')).toHaveLength(2);
    });
  });
});

describe('writes as MCP tasks', () => {
  /**
   * Writes as MCP tasks (docs/mcp-gateway.md, "Writes as tasks"): the real MCP SDK client asks for a
   * task through its experimental task API, the built CLI is the gateway, the example invoice MCP
   * server the upstream, and the built ledger answers over real HTTP. What the host saw is the task's
   * messages; what the upstream saw is counted by the upstream itself.
   */
  const WINDOW_MS = 2500;
  const TIMEOUT_MS = 1200;

  interface TaskRun {
    taskId: string;
    statuses: { status: string; statusMessage?: string }[];
    result?: CallToolResult;
    error?: unknown;
  }

  describe('MCP gateway: a write called as a task', () => {
    let ledgerProcess: LedgerProcess;
    let ledger: LedgerClient;
    let space: Workspace;
    let host: Host;
    let approver: LedgerClient;
    let counter = 0;

    beforeAll(async () => {
      const shared = blockLedger('tasks');
      ledgerProcess = shared.process;
      ledger = shared.ledger;
      approver = shared.approver;
      space = workspace();
      space.writeConfig(
        shared.keyed(
          invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
        ),
      );
      host = await startHost(space.configFile);
    });

    afterAll(async () => {
      await host?.close();
      space?.cleanup();
    });

    const nextRef = (label: string) => `run_task/${label}_${++counter}`;
    const invoice = (ref: string, extra: Record<string, unknown> = {}) => ({
      customer_id: `cus_${counter}`,
      amount_cents: 1200,
      currency: 'EUR',
      operation_ref: ref,
      ...extra,
    });

    /** Calls a tool as a task and follows it to its end through the SDK's own polling. */
    async function asTask(name: string, args: Record<string, unknown>, onCreated?: (id: string) => void, ttl = 60_000) {
      const run: TaskRun = { taskId: '', statuses: [] };
      const stream = host.client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
        task: { ttl },
        timeout: 30_000,
      });
      for await (const message of stream) {
        if (message.type === 'taskCreated') {
          run.taskId = message.task.taskId;
          run.statuses.push({ status: message.task.status });
          onCreated?.(run.taskId);
        } else if (message.type === 'taskStatus') {
          run.statuses.push({ status: message.task.status, statusMessage: message.task.statusMessage });
        } else if (message.type === 'result') {
          run.result = message.result as CallToolResult;
        } else if (message.type === 'error') {
          run.error = message.error;
        }
      }
      return run;
    }
    const envelopeOf = (run: TaskRun) => run.result?.structuredContent as any;
    const finalStatus = async (run: TaskRun) => (await host.client.experimental.tasks.getTask(run.taskId)).status;

    it('tools/list: the write tools may run as tasks; the read tools pass on what the upstream says', async () => {
      const { tools } = await host.client.listTools();
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      expect(byName.create_invoice.execution).toEqual({ taskSupport: 'optional' });
      expect(byName.void_invoice.execution).toEqual({ taskSupport: 'optional' });
      expect(byName.get_invoice.execution?.taskSupport).not.toBe('optional');
    });

    it('answers at once with a task whose id says nothing of the operation; it completes with one invoice', async () => {
      const ref = nextRef('plain');
      const run = await asTask('create_invoice', invoice(ref));
      expect(run.error).toBeUndefined();
      expect(run.taskId).toMatch(/^[0-9a-f]{32}$/);
      expect(run.statuses[0].status).toBe('working');
      expect(envelopeOf(run)).toMatchObject({ ok: true, commit_state: 'committed', operation_ref: ref });
      expect(await finalStatus(run)).toBe('completed');
      expect(space.createCalls(ref)).toBe(1);
      expect(space.invoicesFor(ref)).toBe(1);
    });

    it('a timeout after the provider committed: verified by operation_ref, completed as that success, one invoice', async () => {
      const ref = nextRef('committed');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
      const run = await asTask('create_invoice', invoice(ref));
      const [stored] = space.state.invoices().filter((item) => item.operation_ref === ref);
      expect(envelopeOf(run)).toMatchObject({ ok: true, verification: { evidence_ref: stored.id } });
      expect(await finalStatus(run)).toBe('completed');
      expect(space.createCalls(ref)).toBe(1);
    });

    it('a timeout before anything committed: the task stays working while it verifies, sends again only after a not_found, one invoice', async () => {
      const ref = nextRef('lost');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
      const run = await asTask('create_invoice', invoice(ref));
      const said = run.statuses.map((status) => status.statusMessage ?? '').join('\n');
      expect(said).toMatch(/create_invoice: the outcome is unknown \(\w+\); verifying it by operation_ref at /);
      expect(run.statuses.slice(0, -1).every((status) => status.status === 'working')).toBe(true);
      expect(envelopeOf(run)).toMatchObject({ ok: true, commit_state: 'committed' });
      expect(await finalStatus(run)).toBe('completed');
      expect(space.createCalls(ref)).toBe(2);
      expect(space.invoicesFor(ref)).toBe(1);
      // For docs/mcp-gateway.md, "Writes as tasks": what the host saw.
      process.stdout.write(`${JSON.stringify({ taskId: run.taskId, statuses: run.statuses })}\n`);
      // The second dispatch came only after a not_found recorded past the window.
      const types = (await ledger.getEvents(ref)).events.map((event) => event.type);
      const notFound = types.indexOf('VerificationRecorded');
      expect(notFound).toBeGreaterThan(-1);
      expect(types.lastIndexOf('AttemptDispatched')).toBeGreaterThan(notFound);
    });

    it('a rate limit: the task waits until not_before and sends the same operation again once', async () => {
      const ref = nextRef('limited');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'rate-limit', retry_after_ms: 700 } });
      const run = await asTask('create_invoice', invoice(ref));
      const waiting = run.statuses.find((status) => /waiting until/.test(status.statusMessage ?? ''));
      expect(waiting?.statusMessage).toMatch(/before the same operation is sent again/);
      expect(envelopeOf(run)).toMatchObject({ ok: true });
      expect(space.createCalls(ref)).toBe(2);
      expect(space.invoicesFor(ref)).toBe(1);
      const events = (await ledger.getEvents(ref)).events;
      const limited = events.find((event) => event.type === 'EnvelopeRecorded')?.data.envelope as any;
      const second = events.filter((event) => event.type === 'AttemptDispatched')[1];
      expect(Date.parse(second.recorded_at)).toBeGreaterThanOrEqual(Date.parse(limited.retry.not_before));
    });

    it('a wait longer than the task may work ends it with that answer and its not_before, nothing sent again', async () => {
      const ref = nextRef('long_wait');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'rate-limit', retry_after_ms: 60_000 } });
      const run = await asTask('create_invoice', invoice(ref), undefined, 10_000);
      expect(envelopeOf(run)).toMatchObject({ ok: false, code: 'RATE_LIMITED', next_action: 'wait_and_retry' });
      expect(run.result?.isError).toBe(true);
      expect(await finalStatus(run)).toBe('completed');
      expect(space.createCalls(ref)).toBe(1);
    });

    it('an approval: the task waits for an approver in the ledger, then sends the write once', async () => {
      const target = nextRef('to_void');
      const id = (await host.call('create_invoice', invoice(target))).structuredContent as any;
      const ref = nextRef('void');
      const voids = () => space.state.calls().void_invoice?.by_operation_ref[ref] ?? 0;
      let taskId = '';
      const running = asTask('void_invoice', { invoice_id: id.result.invoice.id, operation_ref: ref }, (created) => {
        taskId = created;
      });
      await until(
        async () => (taskId ? (await host.client.experimental.tasks.getTask(taskId)).statusMessage : undefined),
        (message) => /waiting for an approver/.test(message ?? ''),
        'the task to wait for an approver',
      );
      expect(voids()).toBe(0);
      await approver.recordApproval(ref, { decision: 'granted', approver: 'alice' });
      const run = await running;
      expect(envelopeOf(run)).toMatchObject({ ok: true, result: { invoice: { status: 'void' } } });
      expect(voids()).toBe(1);
    });

    it('a refusal the model must act on ends the task with the envelope as its answer, isError as in a plain call, nothing sent again', async () => {
      const ref = nextRef('invalid');
      const run = await asTask('create_invoice', invoice(ref, { customer_id: 'not a customer' }));
      expect(envelopeOf(run)).toMatchObject({
        ok: false,
        code: 'INVALID_CUSTOMER',
        next_action: 'correct_input',
        commit_state: 'not_committed',
      });
      expect(run.result?.isError).toBe(true);
      expect(await finalStatus(run)).toBe('completed');
      expect(space.createCalls(ref)).toBe(1);
    });

    it('cancelling a task stops its waiting only: nothing more is sent, and the ledger keeps the step', async () => {
      const ref = nextRef('cancelled');
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
      let taskId = '';
      const running = asTask('create_invoice', invoice(ref), (created) => {
        taskId = created;
      });
      await until(
        async () => (taskId ? (await host.client.experimental.tasks.getTask(taskId)).statusMessage : undefined),
        (message) => /verifying it by operation_ref/.test(message ?? ''),
        'the task to verify',
      );
      await host.client.experimental.tasks.cancelTask(taskId);
      await running.catch(() => undefined);
      expect((await host.client.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
      // Past the window, when the task would have verified and sent again had it not been cancelled.
      const state = await ledger.getOperation(ref);
      await sleep(Math.max(0, Date.parse(state.since ?? '') + TIMEOUT_MS + WINDOW_MS + 1_500 - Date.now()));
      expect(space.createCalls(ref)).toBe(1);
      const status = await host.call('operation_status', { operation_ref: ref });
      expect(status.structuredContent).toMatchObject({ operation_ref: ref, status: 'verifying' });
    });

    it('a read tool asked as a task is refused with an MCP error, and a plain write call is answered as before', async () => {
      const read = await asTask('get_invoice', { invoice_id: 'inv_1' });
      expect(read.result).toBeUndefined();
      expect(String((read.error as Error | undefined)?.message)).toMatch(/does not run as a task/);
      const ref = nextRef('plain_call');
      const answer = await host.call('create_invoice', invoice(ref));
      expect(answer.structuredContent).toMatchObject({ ok: true });
    });
  });
});

describe('the call window', () => {
  /**
   * The call window through the MCP gateway: an upstream that commits after the gateway gave up on
   * its call must not be written twice. The gateway declares its call timeout as the call window
   * on every dispatch, so the ledger judges a not_found conclusive only a consistency window after
   * that call could last reach the provider; until then the model is told to verify, never to call
   * again, and nothing is dispatched. Real processes throughout: the SDK's client as the host, the
   * gateway CLI, the example invoice MCP server, and the built ledger over HTTP.
   */
  // The upstream commits DELAY_MS after the create arrives: after the gateway's timeout and after a
  // consistency window counted from the dispatch (where a not_found used to become conclusive), but
  // inside a consistency window counted from the end of the gateway's call (at 90 % of the timeout,
  // the margin it keeps). Both sides are 1.3 s away, for a loaded machine.
  const TIMEOUT_MS = 3000;
  const WINDOW_MS = 4000;
  const DELAY_MS = 5350;
  const waitPast = async (instant: string) => sleep(Math.max(0, Date.parse(instant) - Date.now()) + 100);

  describe('MCP gateway: a slow upstream that commits after the gateway gave up on the call', () => {
    let ledgerProcess: LedgerProcess;
    let ledger: LedgerClient;
    let space: Workspace;
    let host: Host;

    beforeAll(async () => {
      const shared = blockLedger('window');
      ledgerProcess = shared.process;
      ledger = shared.ledger;
      space = workspace();
      space.writeConfig(
        shared.keyed(
          invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
        ),
      );
      host = await startHost(space.configFile);
    });

    afterAll(async () => {
      await host?.close();
      space?.cleanup();
    });

    const create = (ref: string) =>
      host.call('create_invoice', { customer_id: 'cus_slow', amount_cents: 4200, currency: 'EUR', operation_ref: ref });
    const envelope = (result: CallToolResult) => result.structuredContent as any;

    it('the model calling again at once, verifying, and calling again gets verify_operation; one create reaches the upstream, one invoice', async () => {
      const ref = 'run_slow/invoice_1';
      space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'slow', delay_ms: DELAY_MS } });

      const first = envelope(await create(ref));
      expect(first).toMatchObject({ ok: false, commit_state: 'unknown', next_action: 'verify_operation' });
      expect(first.retry.not_before).toEqual(expect.any(String));

      // The model does not wait: it calls again, verifies, and calls again, all inside the window.
      const again = envelope(await create(ref));
      const verified = envelope(await host.call('verify_operation', { operation_ref: ref }));
      const afterVerify = envelope(await create(ref));
      for (const answer of [again, verified, afterVerify]) {
        expect(answer).toMatchObject({
          ok: false,
          commit_state: 'unknown',
          next_action: 'verify_operation',
          retry: { directive: 'never' },
        });
      }
      expect(verified.code).toBe('VERIFICATION_PREMATURE');
      expect(space.createCalls(ref)).toBe(1);

      // After that instant the same call finds the invoice the slow create made, and sends nothing.
      await waitPast(afterVerify.retry.not_before);
      const settled = envelope(await create(ref));
      expect(space.createCalls(ref)).toBe(1);
      const invoices = space.state.invoices().filter((invoice) => invoice.operation_ref === ref);
      expect(invoices).toHaveLength(1);
      expect(settled).toMatchObject({
        ok: true,
        commit_state: 'committed',
        verification: { evidence_ref: invoices[0].id },
      });

      // The ledger's call deadline is the gateway's own call timeout, and a not_found waits a whole
      // consistency window past the last instant that call could reach the provider.
      const events = (await ledger.getEvents(ref)).events;
      const dispatched = events.filter((event) => event.type === 'AttemptDispatched');
      expect(dispatched).toHaveLength(1);
      expect(dispatched[0].data).toMatchObject({ call_window_ms: TIMEOUT_MS, call_deadline: expect.any(String) });
      const deadline = Date.parse(dispatched[0].data.call_deadline as string);
      expect(deadline - Date.parse(dispatched[0].recorded_at)).toBeLessThanOrEqual(TIMEOUT_MS);
      const recorded = events.find((event) => event.type === 'EnvelopeRecorded');
      const lastReach = Math.min(deadline, Date.parse(recorded?.recorded_at as string));
      expect(Date.parse(afterVerify.retry.not_before)).toBeGreaterThanOrEqual(lastReach + WINDOW_MS);
    });
  });

  describe('MCP gateway: a call timeout that does not end before the consistency window is refused at start', () => {
    let space: Workspace;
    beforeAll(() => {
      space = workspace();
    });
    afterAll(() => space?.cleanup());

    const unsafe = () => {
      const config = invoiceGatewayConfig(space, { ledgerUrl: 'http://127.0.0.1:9' }) as any;
      config.write_tools.create_invoice.timeout_ms = 30_000;
      config.write_tools.create_invoice.policy.consistency_window_ms = 30_000;
      const file = join(space.dir, 'unsafe.json');
      writeFileSync(file, JSON.stringify(config));
      return file;
    };
    const reason =
      'write_tools.create_invoice.timeout_ms: 30000 must be less than write_tools.create_invoice.policy.consistency_window_ms (30000)';

    it('the command exits 2 naming the field, and starts nothing', () => {
      const result = spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', unsafe()], {
        encoding: 'utf8',
        input: '',
        timeout: 20_000,
      });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain(reason);
      expect(space.state.calls()).toEqual({});
    });

    it("the host's initialize is answered with the same reason", async () => {
      const client = new Client({ name: 'e2e-host', version: '1.0.0' });
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [CLI, 'mcp-gateway', '--config', unsafe()],
        env: { PATH: process.env.PATH ?? '' },
        stderr: 'ignore',
      });
      try {
        await expect(client.connect(transport)).rejects.toThrow(reason);
      } finally {
        await transport.close().catch(() => undefined);
      }
    });
  });
});

describe("what the host's model reads of the upstream's tools", () => {
  /**
   * What the host's model reads about the upstream's tools. The example invoice server, started
   * with --hostile-descriptions, ends every title and description it publishes (tools, arguments,
   * annotations) with an instruction to the model. Through the gateway the host's tools/list holds
   * none of it unless the configuration vouches for the server; the configuration's own title and
   * description are shown instead. Real processes: the SDK's client, the gateway CLI, the server.
   */
  const HOSTILE = /ignore|admin|SYSTEM|99999999/i;

  describe('MCP gateway: upstream prose never reaches the host unless the configuration vouches for the server', () => {
    let ledgerProcess: LedgerProcess;
    let space: Workspace;
    const hosts: Host[] = [];

    let keyed: ReturnType<typeof blockLedger>['keyed'];

    beforeAll(async () => {
      const shared = blockLedger('prose');
      ledgerProcess = shared.process;
      keyed = shared.keyed;
      space = workspace();
    });

    afterAll(async () => {
      for (const host of hosts) await host.close().catch(() => undefined);
      space?.cleanup();
    });

    async function toolsWith(edit: (config: any) => void): Promise<{ host: Host; tools: Tool[] }> {
      const config = keyed(invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl })) as any;
      config.servers.invoices.args = [INVOICE_SERVER, '--state-dir', space.stateDir, '--hostile-descriptions'];
      edit(config);
      space.writeConfig(config);
      const host = await startHost(space.configFile);
      hosts.push(host);
      return { host, tools: (await host.client.listTools()).tools };
    }

    it('not vouched for: no title, description, schema description or annotation title of the upstream reaches the host', async () => {
      const { host, tools } = await toolsWith(() => undefined);
      const seen = JSON.stringify(tools);
      expect(HOSTILE.exec(seen)?.[0]).toBeUndefined();
      const create = tools.find((tool) => tool.name === 'create_invoice') as Tool;
      expect(create.title).toBeUndefined();
      expect(create.description).toMatch(/^Runs through a recovery ledger/);

      // The tools still work.
      const answer = await host.call('create_invoice', {
        customer_id: 'cus_text',
        amount_cents: 100,
        currency: 'EUR',
        operation_ref: 'run_text/one',
      });
      expect(answer.structuredContent).toMatchObject({ ok: true });
    });

    it('the configured title and description are what the host reads instead', async () => {
      const { tools } = await toolsWith((config) => {
        config.write_tools.create_invoice.title = 'Create an invoice';
        config.write_tools.create_invoice.description = 'Creates one invoice for a customer, in cents.';
        config.read_tools = { get_invoice: { description: 'Reads one invoice by its id.' } };
      });
      expect(HOSTILE.test(JSON.stringify(tools))).toBe(false);
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      expect(Object.keys(byName)).toEqual(
        expect.arrayContaining([
          'create_invoice',
          'void_invoice',
          'get_invoice',
          'lookup_operation',
          'verify_operation',
          'operation_status',
        ]),
      );
      expect(byName.create_invoice.title).toBe('Create an invoice');
      expect(byName.create_invoice.description).toMatch(
        /^Creates one invoice for a customer, in cents\.\n\nRuns through a recovery ledger/,
      );
      expect(byName.create_invoice.annotations).toEqual({
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: true,
      });
      expect(byName.create_invoice.inputSchema.properties).toMatchObject({
        customer_id: { type: 'string' },
        amount_cents: { type: 'number' },
      });
      expect((byName.create_invoice.inputSchema.properties as any).customer_id.description).toBeUndefined();
      expect(byName.get_invoice).toMatchObject({ description: 'Reads one invoice by its id.' });
      expect(byName.get_invoice.title).toBeUndefined();
      // A tool nothing was configured for keeps its name, its schema's structure and its hints.
      expect(byName.lookup_operation).toEqual({
        name: 'lookup_operation',
        inputSchema: {
          type: 'object',
          properties: { operation_ref: { type: 'string', minLength: 1, maxLength: 200 } },
          required: ['operation_ref'],
          $schema: expect.any(String),
        },
        annotations: { readOnlyHint: true },
        execution: expect.any(Object),
      });
    });

    it('vouched for (trust_descriptions): the upstream words pass, so the test above would see them', async () => {
      const { tools } = await toolsWith((config) => {
        config.servers.invoices.trust_descriptions = true;
      });
      const create = tools.find((tool) => tool.name === 'create_invoice') as Tool;
      expect(create.description).toContain(HOSTILE_TEXT);
      expect(create.title).toContain(HOSTILE_TEXT);
      expect(HOSTILE.test(JSON.stringify(tools))).toBe(true);
    });
  });
});

describe("the gateway's traces", () => {
  /**
   * The gateway's traces with the real OpenTelemetry SDK (an in-memory exporter): the host's trace
   * context arrives in `params._meta`, each tool call is an `execute_tool {tool}` span in it, and the
   * upstream MCP server (the example invoice server, a real process) receives the call's trace in its
   * own `params._meta`. The ledger is the built service; the gateway runs in this process so its spans
   * can be read.
   */
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const HOST_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const HOST_SPAN = '00f067aa0ba902b7';

  const traceparentOf = (span: ReadableSpan) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;

  describe('MCP gateway tracing', () => {
    let ledger: LedgerProcess;
    let space: Workspace;
    let gateway: McpGateway;
    let host: Client;

    beforeAll(async () => {
      provider.register();
      const shared = blockLedger('traces');
      ledger = shared.process;
      space = workspace();
      gateway = new McpGateway(
        parseGatewayConfig(shared.keyed(invoiceGatewayConfig(space, { ledgerUrl: ledger.baseUrl })), 'gateway.json'),
      );
      await gateway.start();
      const [hostSide, gatewaySide] = InMemoryTransport.createLinkedPair();
      await gateway.server().connect(gatewaySide);
      host = new Client({ name: 'host', version: '1.0.0' });
      await host.connect(hostSide);
    }, 60_000);
    afterAll(async () => {
      await host?.close();
      await gateway?.close();
      space?.cleanup();
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    });
    beforeEach(() => exporter.reset());

    const call = (name: string, args: Record<string, unknown>) =>
      host.callTool({ name, arguments: args, _meta: { traceparent: `00-${HOST_TRACE}-${HOST_SPAN}-01` } });

    it('a write: the host trace continued, one execute_tool span, its context passed to the upstream server', async () => {
      const result = await call('create_invoice', {
        operation_ref: 'traced/create-1',
        customer_id: 'cus_42',
        amount_cents: 1200,
        currency: 'EUR',
      });
      expect(result.isError).toBeFalsy();
      const tools = exporter.getFinishedSpans().filter((span) => span.name.startsWith('execute_tool'));
      expect(tools.map((span) => span.name)).toEqual(['execute_tool create_invoice']);
      const [tool] = tools;
      expect(tool.spanContext().traceId).toBe(HOST_TRACE);
      expect(tool.parentSpanContext?.spanId).toBe(HOST_SPAN);
      expect(tool.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'create_invoice',
        'recovery_ledger.commit_state': 'committed',
        'recovery_ledger.attempt': 1,
      });
      expect(space.state.calls().create_invoice.traceparents).toEqual([traceparentOf(tool)]);
      for (const span of exporter.getFinishedSpans()) {
        expect(JSON.stringify([span.name, span.attributes, span.events])).not.toContain('traced/create-1');
      }
    });

    it('a read passes through in a span of its own, with error.type when the upstream answers an error', async () => {
      const result = await call('get_invoice', { invoice_id: 'inv_missing' });
      expect(result.isError).toBe(true);
      const [read] = exporter.getFinishedSpans().filter((span) => span.name === 'execute_tool get_invoice');
      expect(read.spanContext().traceId).toBe(HOST_TRACE);
      expect(read.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'get_invoice',
        'error.type': expect.any(String),
      });
      expect(space.state.calls().get_invoice.traceparents).toEqual([traceparentOf(read)]);
    });
  });
});
