/**
 * The article's contract table through the MCP gateway: the real MCP SDK client as the host, the
 * built CLI as the gateway (a process on stdio), the example invoice MCP server as the upstream (a
 * process the gateway starts), and the built ledger over real HTTP. What the model sees is what the
 * host's client returns; what the upstream saw is counted by the upstream itself.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { inputHash, LedgerClient } from '@recovery-ledger/client';
import { validateEnvelope } from '@recovery-ledger/core/domain/envelope/validate-envelope';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { invoiceGatewayConfig, startHost, workspace, type Host, type Workspace } from '../support/mcp-gateway-harness';
import { setTimeout as sleep } from 'node:timers/promises';

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
  let counter = 0;

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl });
    space = workspace();
    space.writeConfig(
      invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
    );
    host = await startHost(space.configFile);
  });

  afterAll(async () => {
    await host?.close();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
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

    await ledger.recordApproval(ref, { decision: 'granted', approver: 'alice' });
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

    await ledger.recordApproval(ref, { decision: 'granted', approver: 'alice' });
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
    await ledger.recordApproval(ref, { decision: 'granted', approver: 'alice' });
    const invalid = envelopeOf(await host.call('void_invoice', { invoice_id: 'inv_missing', operation_ref: ref }), ref);
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

    await ledger.recordApproval(ref, { decision: 'granted', approver: 'alice' });
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
