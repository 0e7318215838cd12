/**
 * The incident console in Debian's Chromium against the built service: the triage queue with each
 * kind of item, its filters and counts, an operation opened from it, an approval granted and one
 * denied from the page (the queue and the timeline change without a reload), live updates, and
 * the phone width with no horizontal overflow. Screenshots for the docs are written to docs/.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, describeInBrowser, screenshotDir } from '../support/browser';
import { request } from '../support/http';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const DOCS = screenshotDir();
/**
 * The role whose keys record approvals, in one place. The page holds whatever key it is given;
 * this is the only line that says which role that key has.
 */
const APPROVER_ROLE = 'approver';
const RUNTIME_KEY = 'console-runtime-key-0000001';
const APPROVER_KEY = 'console-approver-key-000001';
const AUDITOR_KEY = 'console-auditor-key-0000001';
const ADMIN_KEY = 'console-admin-key-000000001';
const RUN = `run_${randomUUID().slice(0, 6)}`;
const REF = {
  escalated: `${RUN}/pay_1`,
  approvalGrant: `${RUN}/refund_1`,
  approvalDeny: `${RUN}/refund_2`,
  unknown: `${RUN}/invoice_1`,
  overdue: `${RUN}/email_1`,
  settled: `${RUN}/email_2`,
};
// Short thresholds through the page's own filters, so a test need not wait for the defaults.
const QUEUE = '#/triage?unknown_after_ms=1000&dispatch_timeout_ms=1000';

let ledger: LedgerProcess;
let context: BrowserContext;
let page: Page;
let profile: string;
let receiver: Server;
const received: string[] = [];
const problems: string[] = [];

const rows = () => page.locator('#triage-table tbody tr');
const refsInQueue = async () => await rows().evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-ref')));
const chip = (group: string, label: string) => page.locator(`#triage-by-${group} a.chip`, { hasText: label });

// The few browser globals used here, typed by hand: this file is compiled without the DOM's types
// (and the page's CSP forbids evaluating strings, so these stay functions).
interface BrowserGlobals {
  document: { querySelectorAll(selector: string): { length: number } };
}
async function rowsShown(selector: string, count: number): Promise<void> {
  await page.waitForFunction(
    ([sel, n]) => (globalThis as unknown as BrowserGlobals).document.querySelectorAll(sel).length === n,
    [selector, count] as const,
  );
}
const queueShows = (count: number) => rowsShown('#triage-table tbody tr', count);
const markPage = () => page.evaluate("window.marker = 'same page'");
const pageMark = () => page.evaluate('window.marker');

describeInBrowser('the incident console', () => {
  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${APPROVER_KEY}:${APPROVER_ROLE}:acme,${AUDITOR_KEY}:auditor:acme,${ADMIN_KEY}:admin:acme`,
        // The webhook receiver below is on loopback.
        LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
      },
    });
    // A subscriber, so the Webhooks tab has deliveries to show.
    receiver = createServer((req, res) => {
      req.on('data', (chunk: Buffer) => received.push(chunk.toString('utf8')));
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((resolveListen) => receiver.listen(0, '127.0.0.1', resolveListen));
    const hook = await request(
      ledger.baseUrl,
      'POST',
      '/v1/admin/webhooks',
      {
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
        kinds: ['step.escalated', 'approval.requested'],
      },
      { authorization: `Bearer ${ADMIN_KEY}` },
    );
    if (hook.status !== 201) throw new Error(`subscribe: ${hook.status} ${JSON.stringify(hook.body)}`);
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
    await ops.escalated(REF.escalated, RUN, 'pay_invoice');
    await ops.awaitingApproval(REF.approvalGrant, RUN, 'refund');
    await ops.awaitingApproval(REF.approvalDeny, RUN, 'refund');
    await ops.verifying(REF.unknown, RUN, 'create_invoice');
    // Every plan now carries its dispatch timeout (the ledger's default when not given), which the
    // queue prefers to its query threshold: this one's is the shortest a plan may name.
    await ops.dispatched(REF.overdue, RUN, 'send_email', { dispatch_timeout_ms: 1000 });
    await ops.succeeded(REF.settled, RUN, 'send_email');
    // Past the one-second thresholds the queue is asked with.
    await new Promise((resolveWait) => setTimeout(resolveWait, 1200));

    profile = mkdtempSync(join(tmpdir(), 'ledger-console-profile-'));
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
    page.on('console', (message) => {
      if (
        message.type() === 'error' &&
        !/Failed to load resource: the server responded with a status of 40[13]/.test(message.text())
      )
        problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await ledger?.stop();
    ledger?.cleanup();
    await new Promise((resolveClose) => (receiver ? receiver.close(resolveClose) : resolveClose(undefined)));
  });

  it('lands on the triage queue: each kind of item, newest first, with counts per kind, tool and reason', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await page.fill('#api-key', APPROVER_KEY);
    await page.click('#key-form button[type=submit]');
    await queueShows(5);
    // A marker that only survives if the page is never reloaded.
    await markPage();

    expect(await refsInQueue()).toEqual([REF.overdue, REF.unknown, REF.approvalDeny, REF.approvalGrant, REF.escalated]);
    const kinds = await rows().evaluateAll((trs) => trs.map((tr) => tr.className.replace(/.*kind-/, '')));
    expect(kinds).toEqual([
      'dispatch_overdue',
      'unknown_outcome',
      'awaiting_approval',
      'awaiting_approval',
      'escalated',
    ]);
    expect(await page.innerText('#triage-total')).toBe('5 items');
    expect(await chip('kind', 'awaiting approval').innerText()).toMatch(/ 2$/);
    expect(await chip('kind', 'escalated').innerText()).toMatch(/ 1$/);
    expect(await chip('tool', 'refund').innerText()).toMatch(/ 2$/);
    expect(await chip('reason', 'MISSING_APPROVAL').innerText()).toMatch(/ 2$/);
    expect(await rows().nth(0).innerText()).toMatch(/dispatched past timeout[\s\S]*over 1\.0 s/);
    await page.locator('#freshness.is-live').waitFor();
    expect(await page.innerText('#freshness')).toMatch(/^live · fresh as of .+ · log position \d+$/);
    await page.screenshot({ path: join(DOCS, 'ui-triage.png'), fullPage: true });
  });

  it('offers every kind the counts show in the Kind filter, possible duplicates first', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await page.fill('#api-key', APPROVER_KEY);
    await page.click('#key-form button[type=submit]');
    await queueShows(5);
    const offered = await page
      .locator('#triage-filters select[name=kind] option')
      .evaluateAll((options) => options.map((option) => option.getAttribute('value')).filter(Boolean));
    const counted = await page
      .locator('#triage-by-kind a.chip')
      .evaluateAll((chips) =>
        chips.map((chip) => new URLSearchParams(chip.getAttribute('href')?.split('?')[1]).get('kind')),
      );
    expect(offered).toEqual(counted);
    expect(offered[0]).toBe('possible_duplicate');
  });

  it('with the default thresholds, lists an unknown outcome not yet due under Waiting, with when it comes due', async () => {
    await page.goto(`${ledger.baseUrl}/ui#/triage?run_id=${RUN}`);
    const waiting = page.locator('#triage-waiting-list li', { hasText: REF.unknown });
    await waiting.waitFor();
    expect(await refsInQueue()).not.toContain(REF.unknown);
    const text = await waiting.innerText();
    expect(text).toMatch(/unknown outcome of create_invoice, due here at .+ \(your time, in 1[45]m \d\ds\)/);
    expect(await page.locator('#triage-waiting').isVisible()).toBe(true);
  });

  it('filters the queue by kind, tool and text on the ref, and by a count chip', async () => {
    await page.selectOption('#triage-filters select[name=kind]', 'awaiting_approval');
    await page.click('#triage-filters button[type=submit]');
    await queueShows(2);
    expect(await refsInQueue()).toEqual([REF.approvalDeny, REF.approvalGrant]);
    expect(page.url()).toContain('kind=awaiting_approval');

    await page.click('#triage-filters [data-clear]');
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    await page.fill('#triage-filters input[name=q]', 'INVOICE_1');
    await page.click('#triage-filters button[type=submit]');
    await queueShows(1);
    expect(await refsInQueue()).toEqual([REF.unknown]);

    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    await chip('tool', 'pay_invoice').click();
    await queueShows(1);
    expect(await refsInQueue()).toEqual([REF.escalated]);

    // The operations list: state, tool, run and text filters, newest first.
    await page.goto(`${ledger.baseUrl}/ui#/operations?run_id=${RUN}&tool=send_email`);
    await rowsShown('#operations-table tbody tr', 2);
    expect(
      await page
        .locator('#operations-table tbody tr')
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-ref'))),
    ).toEqual([REF.settled, REF.overdue]);
    await page.selectOption('#operations-filters select[name=status]', 'succeeded');
    await page.click('#operations-filters button[type=submit]');
    await rowsShown('#operations-table tbody tr', 1);
  });

  it('opens an operation from the queue, and a step is approved from the page: the timeline and the queue change without a reload', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    await markPage();
    await page.click(`#triage-table a[href="#/operation/${encodeURIComponent(REF.approvalGrant)}"]`);
    await page.locator('#op-title', { hasText: REF.approvalGrant }).waitFor();
    await page.locator('#approval-card:not([hidden])').waitFor();
    expect(await page.innerText('#op-status')).toBe('awaiting approval');
    expect(await page.innerText('#verdict-statement')).toContain('awaiting approval (MISSING_APPROVAL)');
    // One row per fact, the transition it caused on the same row: plan, dispatch, envelope.
    const story = page.locator('#timeline tbody tr.event');
    expect(await story.count()).toBe(3);
    expect(await story.nth(2).innerText()).toMatch(
      /EnvelopeRecorded\s*NEEDS APPROVAL[\s\S]*awaiting approval[\s\S]*MISSING_APPROVAL → next request_approval/,
    );
    await page.fill('#approval-form input[name=approver]', 'Dana on call');
    await page.fill('#approval-form textarea[name=reason]', 'refund confirmed with the customer');
    await page.screenshot({ path: join(DOCS, 'ui-approval.png'), fullPage: true });

    await page.click('#approval-form button[value=granted]');
    await page.locator('#approval-result.ok').waitFor();
    expect(await page.innerText('#approval-result')).toBe(
      'Granted by Dana on call: the step is now retry ready (next: dispatch).',
    );
    await rowsShown('#timeline tbody tr.event', 4);
    expect(await story.nth(3).innerText()).toMatch(
      /ApprovalRecorded[\s\S]*GRANTED[\s\S]*retry ready[\s\S]*APPROVAL_GRANTED/,
    );
    expect(await page.innerText('#op-status')).toBe('retry ready');
    expect(await page.locator('#approval-form').isHidden()).toBe(true);
    expect(await page.textContent('#approval-title')).toBe('Approval recorded');
    await page.screenshot({ path: join(DOCS, 'ui-approval-granted.png'), fullPage: true });

    await page.click('nav.tabs a[data-view=triage]');
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(4);
    expect(await refsInQueue()).not.toContain(REF.approvalGrant);
    expect(await chip('kind', 'awaiting approval').innerText()).toMatch(/ 1$/);
    expect(await pageMark()).toBe('same page');
  });

  it('denies a step with a reason: it escalates, and the queue lists it as escalated', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(4);
    await page.click(`#triage-table a[href="#/operation/${encodeURIComponent(REF.approvalDeny)}"]`);
    await page.locator('#op-title', { hasText: REF.approvalDeny }).waitFor();
    await page.locator('#approval-card:not([hidden])').waitFor();
    await page.fill('#approval-form input[name=approver]', 'Dana on call');
    await page.fill('#approval-form textarea[name=reason]', 'duplicate refund request');
    await page.click('#approval-form button[value=denied]');
    await page.locator('#approval-result.ok').waitFor();
    expect(await page.innerText('#approval-result')).toBe(
      'Denied by Dana on call: the step is now escalated (next: none).',
    );
    await rowsShown('#timeline tbody tr.event', 4);
    expect(await page.locator('#timeline tbody tr.event').nth(3).innerText()).toMatch(
      /ApprovalRecorded[\s\S]*DENIED[\s\S]*escalated[\s\S]*APPROVAL_DENIED/,
    );
    expect(await page.innerText('#verdict-statement')).toBe(
      'escalated — not committed: approval denied by Dana on call',
    );

    // Still four: the denied step left the approvals and joined the escalations.
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(4);
    // The table on screen may still be the one drawn before the denial (the same four rows); the
    // queue's next read, from the read models, redraws it.
    const deniedRow = page.locator(`#triage-table tr[data-ref="${REF.approvalDeny}"]`);
    await page.locator(`#triage-table tr.kind-escalated[data-ref="${REF.approvalDeny}"]`).waitFor();
    expect(await deniedRow.getAttribute('class')).toContain('kind-escalated');
    expect(await chip('reason', 'APPROVAL_DENIED').innerText()).toMatch(/ 1$/);
  });

  it('a key that may not record approvals is told so, and nothing is recorded', async () => {
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
    const ref = `${RUN}/refund_3`;
    await ops.awaitingApproval(ref, RUN, 'refund');
    await page.fill('#api-key', AUDITOR_KEY);
    await page.click('#key-form button[type=submit]');
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
    await page.locator('#approval-card:not([hidden])').waitFor();
    await page.fill('#approval-form input[name=approver]', 'Auditor');
    await page.fill('#approval-form textarea[name=reason]', 'should not count');
    await page.click('#approval-form button[value=granted]');
    await page.locator('#approval-result.error').waitFor();
    expect(await page.innerText('#approval-result')).toContain('This key may not record approvals (FORBIDDEN)');
    expect(await page.innerText('#op-status')).toBe('awaiting approval');
    await page.fill('#api-key', APPROVER_KEY);
    await page.click('#key-form button[type=submit]');
  });

  it('follows the log: a new escalation appears in the queue, and the open operation changes, without a reload', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    await markPage();
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
    const fresh = `${RUN}/pay_2`;
    await ops.escalated(fresh, RUN, 'pay_invoice');
    await page.locator(`#triage-table tr[data-ref="${fresh}"]`).waitFor({ timeout: 20_000 });
    expect((await refsInQueue())[0]).toBe(fresh);

    await page.click(`#triage-table a[href="#/operation/${encodeURIComponent(REF.unknown)}"]`);
    await page.locator('#op-title', { hasText: REF.unknown }).waitFor();
    expect(await page.innerText('#op-status')).toBe('verifying');
    await ops.submit(REF.unknown, 'VerificationRecorded', {
      outcome: 'found_committed',
      checked_at: new Date().toISOString(),
      evidence_ref: 'inv_42',
    });
    await page.locator('#op-status', { hasText: 'succeeded' }).waitFor({ timeout: 20_000 });
    await page.locator('#verdict-statement', { hasText: 'evidence inv_42' }).waitFor();
    expect(await pageMark()).toBe('same page');

    // The raw events are one click away: every stored event, transitions included.
    await page.click('#toggle-raw');
    expect(await page.locator('#raw-events tr.raw-row').count()).toBe(8);
  });

  it('shows the webhook deliveries of the tenant', async () => {
    await page.goto(`${ledger.baseUrl}/ui#/webhooks`);
    // Escalations pay_1, refund_2 (denied), pay_2; approvals refund_1, refund_2, refund_3.
    await rowsShown('#webhook-table tbody tr', 6);
    const tiles = await page.locator('#webhook-counts .tile').allInnerTexts();
    expect(tiles.map((tile) => tile.replace(/\s+/g, ' '))).toEqual([
      '6 Delivered',
      '0 Pending (retrying)',
      '0 Failed (gave up)',
    ]);
    expect(await page.locator('#webhook-table tbody tr').first().innerText()).toMatch(
      /step\.escalated[\s\S]*pay_2[\s\S]*delivered[\s\S]*HTTP 204/,
    );
    await page.screenshot({ path: join(DOCS, 'ui-webhooks.png'), fullPage: true });
  });

  it('works at 390 px: no horizontal overflow on the queue, the lists, an operation or the trust view', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const widths: Record<string, number> = {};
    const measure = async (name: string) => {
      widths[name] = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    };
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    await measure('queue');
    // The first screen is the queue: its first items are in view, the filters folded behind one control.
    const [first, second] = await page
      .locator('#triage-table tbody tr')
      .evaluateAll((rows) => rows.slice(0, 2).map((row) => row.getBoundingClientRect().bottom));
    expect(first).toBeLessThanOrEqual(844);
    expect(second).toBeLessThanOrEqual(844);
    expect(await page.isVisible('#triage-filters')).toBe(false);
    await page.screenshot({ path: join(DOCS, 'ui-triage-390.png'), fullPage: false });
    await page.click('#triage-refine summary');
    await page.locator('#triage-filters select[name=kind]').waitFor({ state: 'visible' });
    await page.click('#triage-refine summary');
    await page.goto(`${ledger.baseUrl}/ui#/operations`);
    await page.locator('#operations-table tbody tr').first().waitFor();
    await measure('operations');
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(REF.approvalGrant)}`);
    await page.locator('#timeline tbody tr.event').nth(3).waitFor();
    await page.locator('#timeline tbody tr.event').nth(3).click();
    await page.locator('#timeline tr.detail .as-of dl').waitFor();
    await measure('operation');
    await page.click('#toggle-raw');
    await measure('operation with raw events');
    await page.goto(`${ledger.baseUrl}/ui#/trust`);
    await page.locator('#trust-tools tbody tr').first().waitFor();
    await measure('trust');
    await page.goto(`${ledger.baseUrl}/ui#/webhooks`);
    await page.locator('#webhooks-view:not([hidden])').waitFor();
    await measure('webhooks');
    expect(widths).toEqual({
      queue: 390,
      operations: 390,
      operation: 390,
      'operation with raw events': 390,
      trust: 390,
      webhooks: 390,
    });
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  it('is reachable by keyboard: Tab reaches the queue links and Enter opens one', async () => {
    await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
    await queueShows(5);
    let reached = '';
    for (let i = 0; i < 60 && !reached.startsWith('#/operation/'); i++) {
      await page.keyboard.press('Tab');
      reached = (await page.evaluate(
        "document.activeElement ? document.activeElement.getAttribute('href') || '' : ''",
      )) as string;
    }
    expect(reached).toMatch(/^#\/operation\//);
    await page.keyboard.press('Enter');
    await page.locator('#operation-view:not([hidden])').waitFor();
    await page.locator('#timeline tbody tr.event').first().focus();
    await page.keyboard.press('Enter');
    await page.locator('#timeline tr.detail').waitFor();
    expect(problems).toEqual([]);
  });

  it('shows which worker holds the open step and a listed one, and that none does once it is given back, also at 390 px', async () => {
    const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
    const ref = `${RUN}/lease_1`;
    // A worker's name is its own choice, and may be long without a space: the label must wrap.
    const worker = `console-worker-${'x'.repeat(60)}`;
    await ops.submit(ref, 'StepPlanned', {
      run_id: RUN,
      tool: 'lease_tool',
      side_effect: 'write',
      input_hash: `sha256:${ref}`,
    });
    const taken = await request(
      ledger.baseUrl,
      'GET',
      `/v1/work?worker=${worker}&tool=lease_tool&wait_ms=5000&lease_ms=60000`,
      undefined,
      { authorization: `Bearer ${RUNTIME_KEY}` },
    );
    expect(taken.body.items).toHaveLength(1);
    const lease = taken.body.items[0].lease as { id: string; expires_at: string };

    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
    await page.locator('#op-title', { hasText: ref }).waitFor();
    await page.locator('#op-holder.is-held').waitFor();
    expect(await page.innerText('#op-status')).toBe('planned');
    expect(await page.innerText('#op-holder')).toBe(`held by ${worker} until ${lease.expires_at.slice(11, 19)} UTC`);
    expect(await page.content()).not.toContain(lease.id);
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBe(390);
    await page.screenshot({ path: join(DOCS, 'ui-operation-holder-390.png'), fullPage: false });
    await page.setViewportSize({ width: 1440, height: 900 });

    // Dispatched, still held: the operations list labels it from one read for the page.
    await ops.submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: `sha256:${ref}` });
    await page.goto(`${ledger.baseUrl}/ui#/operations?tool=lease_tool`);
    const row = page.locator(`#operations-table tr[data-ref="${ref}"]`);
    // Beside the state (the list redraws when the log moves, and the label is read again with it).
    await row.locator('td[data-label="State"] [data-holder]', { hasText: `held by ${worker}` }).waitFor();
    await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(ref)}`);
    await page.locator('#op-holder.is-held').waitFor();
    await markPage();

    // Given back, then its outcome recorded: the view redraws from the log and reads the holder with it.
    const released = await request(
      ledger.baseUrl,
      'POST',
      `/v1/operations/${encodeURIComponent(ref)}/lease/release`,
      { lease_id: lease.id },
      { authorization: `Bearer ${RUNTIME_KEY}` },
    );
    expect(released.body).toEqual({ released: true });
    await ops.submit(ref, 'EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) });
    await page.locator('#op-status', { hasText: 'verifying' }).waitFor({ timeout: 20_000 });
    await page.locator('#op-holder', { hasText: 'no worker holds it' }).waitFor({ timeout: 5_000 });
    expect(await pageMark()).toBe('same page');
    expect(problems).toEqual([]);
  });
});
