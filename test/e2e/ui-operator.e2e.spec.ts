/**
 * The console's operator actions in Debian's Chromium against the built service (docs/contract.md
 * §4.10), at 1,440 and 390 px: after "Use key" the header shows the key's role; the step's context
 * (tool, planned input as recorded, the last envelope's messages and safe details, attempts) is
 * shown before any action; only the actions the state allows are offered, disabled with the reason
 * for a role that may not use them; an escalated unknown outcome is driven to a terminal state with
 * its evidence on record. Screenshots for the docs are written by `npm run screenshots`.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { canonicalJson } from '@recovery-ledger/core/shared/canonical-json';
import { CHROMIUM, describeInBrowser, screenshotDir } from '../support/browser';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const DOCS = screenshotDir();
const RUNTIME_KEY = 'ui-operator-runtime-key-0001';
const OPERATOR_KEY = 'ui-operator-operator-key-001';
const AUDITOR_KEY = 'ui-operator-auditor-key-0001';
const RUN = `run_${randomUUID().slice(0, 6)}`;
const INPUT = { customer: 'cus_42', amount_cents: 12_500, currency: 'EUR' };
const INPUT_HASH = `${createHash('sha256').update(canonicalJson(INPUT)).digest('hex')}`;

let ledger: LedgerProcess;
let context: BrowserContext;
let page: Page;
let profile: string;
const problems: string[] = [];

/** A refund whose write timed out and whose lookup was unavailable: escalated, outcome unknown. */
async function escalatedUnknown(ref: string): Promise<void> {
  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  for (const event of [
    fact('StepPlanned', {
      run_id: RUN,
      tool: 'refund_payment',
      side_effect: 'write',
      input_hash: INPUT_HASH,
      input: INPUT,
      policy: { consistency_window_ms: 0 },
    }),
    fact('AttemptDispatched', { attempt: 1, input_hash: INPUT_HASH }),
    fact('EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.outcomeUnknown(ref, 'get_refund_by_operation_ref'),
    }),
    fact('VerificationRecorded', { outcome: 'lookup_unavailable', checked_at: new Date().toISOString() }),
  ]) {
    const answer = await runtime.submit(ref, [event]);
    if (answer.status !== 200) throw new Error(`${event.type}: ${answer.status} ${JSON.stringify(answer.body)}`);
  }
}

async function useKey(key: string): Promise<void> {
  await page.fill('#api-key', key);
  await page.click('#key-form button[type=submit]');
}

describeInBrowser('the console: operator actions', () => {
  const REF = `${RUN}/refund_1`;
  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${AUDITOR_KEY}:auditor:acme` },
    });
    await escalatedUnknown(REF);
    profile = mkdtempSync(join(tmpdir(), 'ledger-operator-profile-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1440, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (error) => problems.push(error.message));
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('shows the role after "Use key", the step context, and the actions disabled with the reason for an auditor', async () => {
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(REF)}`);
    await useKey(AUDITOR_KEY);
    await page.locator('#key-role', { hasText: 'role auditor, tenant acme' }).waitFor();
    await page.locator('#operator-card button#op-action-found').waitFor();
    // Unknown outcome, escalated: a person may record what they found, or acknowledge; not cancel or reopen.
    const offered = await page
      .locator('#operator-buttons button')
      .evaluateAll((buttons) => buttons.map((button) => button.id));
    expect(offered).toEqual(['op-action-found', 'op-action-not-found', 'op-action-ack']);
    expect(await page.locator('#op-action-found').isDisabled()).toBe(true);
    expect(await page.innerText('#operator-buttons .disabled-reason')).toBe(
      'An auditor key may not record operator facts: use a key with the operator role.',
    );
    const contextText = await page.innerText('#context-facts');
    expect(contextText).toContain('refund_payment (write)');
    expect(contextText).toContain('"customer": "cus_42"');
    expect(contextText).toContain('"amount_cents": 12500');
    expect(contextText).toContain('The request is being checked before anything is sent again.');
    expect(contextText).toContain('Verify operation_ref before any new write.');
    expect(contextText).toContain('get_refund_by_operation_ref');
    expect(contextText).toContain('1 used, 0 left');
  });

  it('an operator records what they found, with its evidence, and the step succeeds on the page (1,440 px)', async () => {
    await useKey(OPERATOR_KEY);
    await page.locator('#key-role', { hasText: 'role operator, tenant acme' }).waitFor();
    await page.locator('#op-action-found:not([disabled])').waitFor();
    await page.fill('#operator-form textarea[name=reason]', 'checked the provider: refund re_9 exists');
    await page.click('#op-action-found');
    expect(await page.innerText('#operator-result')).toBe('Say the evidence ref you saw first.');
    await page.screenshot({ path: join(DOCS, 'ui-operator-actions.png'), fullPage: true });
    await page.fill('#operator-form input[name=evidence]', 're_9');
    await page.click('#op-action-found');
    await page
      .locator('#operator-result', {
        hasText: 'Recorded that the write committed (re_9): the step is now succeeded',
      })
      .waitFor();
    await page.locator('#op-status', { hasText: 'succeeded' }).waitFor();
    await page.locator('#verdict-statement', { hasText: 'verified by a person' }).waitFor();
    const events = await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(REF)}/events`, undefined, {
      authorization: `Bearer ${AUDITOR_KEY}`,
    });
    const recorded = events.body.events.find((event: { type: string }) => event.type === 'OutcomeVerifiedManually');
    expect(recorded.data).toEqual({
      outcome: 'found_committed',
      note: 'checked the provider: refund re_9 exists',
      evidence_ref: 're_9',
    });
    expect(recorded.actor).toMatch(/^key_/);
    expect(await page.locator('#operator-buttons button').count()).toBe(0);
  });

  it('at 390 px: acknowledge an escalation; it stays escalated, the page says who has it, and nothing overflows', async () => {
    const ref = `${RUN}/refund_2`;
    await escalatedUnknown(ref);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
    await page.locator('#op-action-ack:not([disabled])').waitFor();
    await page.fill('#operator-form textarea[name=reason]', 'taking it');
    await page.fill('#operator-form input[name=assignee]', 'ana');
    await page.click('#op-action-ack');
    await page
      .locator('#operator-result', { hasText: 'Acknowledged: ana has it: the step is now escalated' })
      .waitFor();
    await page.locator('#operator-buttons', { hasText: 'Acknowledged: ana has it' }).waitFor();
    expect(await page.locator('#op-action-ack').count()).toBe(0);
    await page.screenshot({ path: join(DOCS, 'ui-operator-actions-390.png'), fullPage: true });
    const width = await page.evaluate(
      () =>
        (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement
          .scrollWidth,
    );
    expect(width).toBe(390);
    expect(problems).toEqual([]);
  });

  it('"What is being decided" shows the input the approval binds, with its hash, or says it was not recorded', async () => {
    const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
    const submitAll = async (ref: string, events: ReturnType<typeof fact>[]) => {
      for (const event of events) {
        const answer = await runtime.submit(ref, [event]);
        if (answer.status !== 200) throw new Error(`${event.type}: ${answer.status} ${JSON.stringify(answer.body)}`);
      }
    };
    const contextOf = async (ref: string) => {
      await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
      await page.locator('#op-title', { hasText: ref }).waitFor();
      await page.locator('#context-facts', { hasText: 'Planned input' }).waitFor();
      return page.innerText('#context-facts');
    };
    await page.goto(`${ledger.baseUrl}/ui`);
    await useKey(AUDITOR_KEY);
    await page.locator('#key-role', { hasText: 'role auditor, tenant acme' }).waitFor();
    // Planned with no input, only its hash: the approver is told, not shown a hash as if it were the input.
    const unrecorded = `${RUN}/approve_hash_only`;
    await submitAll(unrecorded, [
      fact('StepPlanned', { run_id: RUN, tool: 'refund_payment', side_effect: 'write', input_hash: 'sha256:in-4' }),
      fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-4' }),
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.missingApproval(unrecorded) }),
    ]);
    expect(await contextOf(unrecorded)).toContain(
      'Input to approve\nthe input for this hash was not recorded (input sha256:in-4)',
    );
    // Planned at 12,500, corrected to 99,900: the approval is for the corrected input, and says so.
    const corrected = `${RUN}/approve_corrected`;
    const CORRECTED = { ...INPUT, amount_cents: 99_900 };
    const correctedHash = createHash('sha256').update(canonicalJson(CORRECTED)).digest('hex');
    await submitAll(corrected, [
      fact('StepPlanned', {
        run_id: RUN,
        tool: 'refund_payment',
        side_effect: 'write',
        input_hash: INPUT_HASH,
        input: INPUT,
      }),
      fact('AttemptDispatched', { attempt: 1, input_hash: INPUT_HASH }),
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.invalidRecipient(corrected, 2) }),
      fact('AttemptDispatched', { attempt: 2, input_hash: correctedHash, input: CORRECTED }),
      fact('EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.missingApproval(corrected) }),
    ]);
    const shown = await contextOf(corrected);
    expect(shown).toContain(`Input to approve\ninput ${correctedHash}`);
    expect(await page.innerText('#approval-input')).toContain('"amount_cents": 99900');
    expect(await page.innerText('#approval-input')).not.toContain('12500');
    expect(problems).toEqual([]);
  });

  it('a not-found inside the consistency window says until when in local time, and counts down', async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    // Its own key: the case before it reads the page as an auditor.
    await page.goto(`${ledger.baseUrl}/ui`);
    await useKey(OPERATOR_KEY);
    await page.locator('#key-role', { hasText: 'role operator, tenant acme' }).waitFor();
    const ref = `${RUN}/refund_3`;
    const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
    for (const event of [
      fact('StepPlanned', {
        run_id: RUN,
        tool: 'refund_payment',
        side_effect: 'write',
        input_hash: INPUT_HASH,
        policy: { consistency_window_ms: 600_000 },
      }),
      fact('AttemptDispatched', { attempt: 1, input_hash: INPUT_HASH }),
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }),
    ])
      expect((await runtime.submit(ref, [event])).status).toBe(200);
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
    await page.locator('#op-action-not-found:not([disabled])').waitFor();
    await page.fill('#operator-form textarea[name=reason]', 'nothing at the provider yet');
    await page.click('#op-action-not-found');
    const refusal = page.locator('#operator-result', { hasText: 'too early to say not found' });
    await refusal.waitFor();
    const first = await refusal.innerText();
    // The same refusal through the API (a refused fact records nothing) names the instant.
    const operator = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${OPERATOR_KEY}` });
    const refused = await operator.submit(ref, [
      fact('OutcomeVerifiedManually', { outcome: 'not_found', note: 'nothing at the provider yet' }),
    ]);
    expect(refused.body.code).toBe('VERIFICATION_PREMATURE');
    const due = refused.body.directive.not_before as string;
    const local = await page.evaluate((iso) => new Date(iso).toLocaleTimeString(), due);
    expect(first).toContain(`until ${local} (your time, in `);
    expect(first).not.toMatch(/\d{4}-\d\d-\d\dT|UTC/);
    // The countdown moves on its own, without another click.
    await page.waitForFunction(
      (before) =>
        (globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }).document
          .getElementById('operator-result')
          .textContent.includes('(your time, in ') &&
        (
          globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }
        ).document.getElementById('operator-result').textContent !== before,
      first,
    );
  });
});

describeInBrowser('the console: bulk acknowledge and cancel from the queue', () => {
  // Runs after the block above in the same file: its own ledger and browser.
  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${AUDITOR_KEY}:auditor:acme` },
    });
    profile = mkdtempSync(join(tmpdir(), 'ledger-operator-bulk-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1440, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('offers cancel only for escalations whose outcome is known, and says each result in words', async () => {
    const known = `${RUN}/bulk_known`;
    const unknown = `${RUN}/bulk_unknown`;
    const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
    for (const event of [
      fact('StepPlanned', { run_id: RUN, tool: 'pay_invoice', side_effect: 'write', input_hash: 'sha256:in-1' }),
      fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }),
      fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.alreadyPaid(known) }),
    ]) {
      expect((await runtime.submit(known, [event])).status).toBe(200);
    }
    await escalatedUnknown(unknown);
    await page.goto(`${ledger.baseUrl}/ui#/triage?q=${encodeURIComponent(`${RUN}/bulk_`)}`);
    await useKey(OPERATOR_KEY);
    await page.locator('#triage-table input.bulk-pick').nth(1).waitFor();
    await page.check(`#triage-table input.bulk-pick[data-ref="${known}"]`);
    await page.check(`#triage-table input.bulk-pick[data-ref="${unknown}"]`);
    // The unknown outcome would be refused OUTCOME_UNVERIFIED: cancel is not offered while it is picked.
    expect(await page.locator('#bulk-cancel').isDisabled()).toBe(true);
    expect(await page.innerText('#bulk-cancel-hint')).toContain('whose outcome is unknown cannot be cancelled');
    await page.uncheck(`#triage-table input.bulk-pick[data-ref="${unknown}"]`);
    expect(await page.locator('#bulk-cancel').isDisabled()).toBe(false);
    expect(await page.locator('#bulk-cancel-hint').isHidden()).toBe(true);
    await page.fill('#bulk-form input[name=reason]', 'the customer withdrew');
    await page.click('#bulk-cancel');
    await page.locator('#bulk-results li').first().waitFor();
    const lines = await page
      .locator('#bulk-results li')
      .evaluateAll((items) => items.map((item) => [item.getAttribute('data-ref'), item.className, item.textContent]));
    expect(lines).toEqual([[known, 'ok', `${known}: Cancelled; now cancelled`]]);
    await page.screenshot({ path: join(DOCS, 'ui-operator-bulk.png'), fullPage: true });
    // The queue redraws: the cancelled step has left it, the other is still there to acknowledge.
    await page.waitForFunction(
      (ref) =>
        !(globalThis as unknown as { document: { querySelector(s: string): unknown } }).document.querySelector(
          `#triage-table tr[data-ref="${ref}"]`,
        ),
      known,
    );
    await page.check(`#triage-table input.bulk-pick[data-ref="${unknown}"]`);
    await page.fill('#bulk-form input[name=assignee]', 'ana');
    await page.click('#bulk-ack');
    await page
      .locator('#bulk-results li.ok', { hasText: `${unknown}: Acknowledged: ana has it; now escalated` })
      .waitFor();
  });
});
