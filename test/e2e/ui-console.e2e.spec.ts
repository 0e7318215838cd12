/**
 * The incident console in Debian's Chromium against the built service, one describe block per
 * subject: the browser and, for the outage, a service process stopped and started again under an
 * open page. Each block keeps its own header, constants and hooks; where Chromium is missing,
 * `describeInBrowser` says so and skips its block (test/support/browser.ts).
 */

import { randomUUID, createHash } from 'node:crypto';
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, describeInBrowser, screenshotDir } from '../support/browser';
import { request, committedPosition, submitFact, fact, ledgerAt } from '../support/http';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess, freePort } from '../support/ledger-process';
import { committed, invalidInput, unknownOutcome } from '../support/cli-harness';
import { canonicalJson } from '@recovery-ledger/core';
import { until } from '../support/until';

describe('the triage queue and approvals', () => {
  /**
   * The incident console in Debian's Chromium against the built service: the triage queue with each
   * kind of item, its filters and counts, an operation opened from it, an approval granted and one
   * denied from the page (the queue and the timeline change without a reload), live updates, and
   * the phone width with no horizontal overflow. Screenshots for the docs are written to docs/.
   */
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

      expect(await refsInQueue()).toEqual([
        REF.overdue,
        REF.unknown,
        REF.approvalDeny,
        REF.approvalGrant,
        REF.escalated,
      ]);
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

    it('filters the queue by kind, tool and text on the ref, and by a count chip', async () => {
      await page.goto(`${ledger.baseUrl}/ui${QUEUE}`);
      await queueShows(5);
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

    it('with the default thresholds, lists an unknown outcome once a lookup can settle it, and one not yet due under Waiting', async () => {
      const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
      const run = `${RUN}_w`;
      const later = `${run}/invoice_later`;
      const now = `${run}/invoice_now`;
      const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
      // Its plan's consistency window is 10 minutes: a not_found would be inconclusive until then.
      await ops.verifying(later, run, 'create_invoice', { consistency_window_ms: 600_000 });
      try {
        await page.goto(`${ledger.baseUrl}/ui#/triage?run_id=${run}`);
        const waiting = page.locator('#triage-waiting-list li', { hasText: later });
        await waiting.waitFor();
        await page
          .locator('#triage-empty', {
            hasText: 'Nothing needs a person yet: the unknown outcomes below are waiting for a lookup.',
          })
          .waitFor();
        expect(await refsInQueue()).toEqual([]);
        expect(await waiting.innerText()).toMatch(
          /unknown outcome of create_invoice, needs a person at .+ \(your time, in (9|10)m \d\ds\) unless a lookup settles it first/,
        );
        // No consistency window: a lookup can settle it at once, so a person is asked at once.
        await ops.verifying(now, run, 'create_invoice', { consistency_window_ms: 0 });
        await page.locator(`#triage-table tr.kind-unknown_outcome[data-ref="${now}"]`).waitFor();
        expect(await refsInQueue()).toEqual([now]);
        expect(await rows().first().innerText()).toContain('from its plan');
        expect(await page.locator('#triage-empty').isHidden()).toBe(true);
        expect(await page.locator('#triage-waiting-list li').count()).toBe(1);
      } finally {
        // Settled, so nothing after this case finds them in the queue. (A failure above is the one
        // reported: a step it never made is refused here, and that is ignored.)
        for (const ref of [later, now])
          await runtime.submit(ref, [
            fact('VerificationRecorded', { outcome: 'found_committed', checked_at: new Date().toISOString() }),
          ]);
      }
    });
  });
});

describe('an incident reviewed with an auditor key', () => {
  /**
   * The incident console (/ui) in headless Chromium against the built service: a reviewer with an
   * auditor key opens the contract's incident, reads the verdict, the story with each fact and the
   * transition it caused on one row, the time in each state, opens the run and the trust metrics.
   * The key goes out in the Authorization header only. The operation's screenshot is written to
   * docs/ (the README shows it), the others to test-artifacts/.
   */
  const ARTIFACTS = resolve(__dirname, '../../test-artifacts');
  const DOCS = screenshotDir();
  const RUNTIME_KEY = 'ui-runtime-key-000000001';
  const AUDITOR_KEY = 'ui-auditor-key-000000001';
  const RUN = `run_${randomUUID().slice(0, 6)}`;
  const INCIDENT = `${RUN}/step_4`;

  let ledger: LedgerProcess;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const requests: Array<{ url: string; authorization?: string }> = [];
  const problems: string[] = [];

  async function submit(ref: string, type: string, data: Record<string, unknown>): Promise<number> {
    const answer = await submitFact(ledger.baseUrl, ref, type, data, { authorization: `Bearer ${RUNTIME_KEY}` });
    return committedPosition(answer, `${type} on ${ref}`, { refusals: 'allowed' }) ?? 0;
  }

  const text = (selector: string) => page.locator(selector).innerText();

  describeInBrowser('the incident review page', () => {
    beforeAll(async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      ledger = await startLedger({
        env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme` },
      });

      // The contract's incident: unknown outcome, a refused retry, a lookup that finds it, a duplicate prevented.
      await submit(INCIDENT, 'StepPlanned', {
        run_id: RUN,
        tool: 'create_invoice',
        side_effect: 'write',
        input_hash: 'sha256:9c1f',
        policy: { verification_tool: 'get_invoice_by_operation_ref' },
      });
      await submit(INCIDENT, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:9c1f' });
      await submit(INCIDENT, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(INCIDENT) });
      await submit(INCIDENT, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:9c1f' });
      await submit(INCIDENT, 'VerificationRecorded', {
        outcome: 'found_committed',
        checked_at: new Date().toISOString(),
        evidence_ref: 'inv_123',
      });
      await submit(INCIDENT, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:9c1f' });
      const email = `${RUN}/step_5`;
      await submit(email, 'StepPlanned', {
        run_id: RUN,
        tool: 'send_email',
        side_effect: 'write',
        input_hash: 'sha256:aa01',
      });
      await submit(email, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:aa01' });
      await submit(email, 'EnvelopeRecorded', { attempt: 1, envelope: committed(email, 'msg_77') });
      const fix = `${RUN}/step_6`;
      await submit(fix, 'StepPlanned', {
        run_id: RUN,
        tool: 'send_email',
        side_effect: 'write',
        input_hash: 'sha256:bb01',
      });
      await submit(fix, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:bb01' });
      const last = await submit(fix, 'EnvelopeRecorded', { attempt: 1, envelope: invalidInput(fix) });
      await submit(fix, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:bb01' });
      for (const path of [`/v1/runs/${RUN}`, '/v1/metrics/trust']) {
        const answer = await request(
          ledger.baseUrl,
          'GET',
          `${path}?wait_for_position=${last + 1}&wait_timeout_ms=20000`,
          undefined,
          { authorization: `Bearer ${AUDITOR_KEY}` },
        );
        if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
      }

      profile = mkdtempSync(join(tmpdir(), 'ledger-ui-profile-'));
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
        viewport: { width: 1360, height: 900 },
      });
      page = context.pages()[0] ?? (await context.newPage());
      page.on('request', (sent) => requests.push({ url: sent.url(), authorization: sent.headers().authorization }));
      // A CSP violation or a script error shows up here; the page must have neither.
      page.on('console', (message) => {
        if (
          message.type() === 'error' &&
          !/Failed to load resource: the server responded with a status of 40[14]/.test(message.text())
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
    });

    it('asks for a key when the service needs one', async () => {
      await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(INCIDENT)}`);
      await page.locator('#message.error').waitFor();
      expect(await text('#message')).toContain('needs an API key');
      expect(await page.locator('#operation-view').isHidden()).toBe(true);
    });

    it("shows an operation's verdict, its proof, each fact with the transition it caused, and the time in each state", async () => {
      await page.fill('#api-key', AUDITOR_KEY);
      await page.click('#key-form button[type=submit]');
      await page.locator('#operation-view').waitFor();
      await page.locator('#timeline tbody tr.event').nth(5).waitFor();

      expect(await text('#key-status')).toBe('key set for this tab');
      expect(await page.inputValue('#api-key')).toBe('');
      expect(await page.evaluate("sessionStorage.getItem('recovery-ledger.api-key')")).toBe(AUDITOR_KEY);

      expect(await text('#op-title')).toBe(INCIDENT);
      expect(await text('#op-status')).toBe('succeeded');
      expect(await text('#verdict-statement')).toBe(
        'committed — verified via get_invoice_by_operation_ref, evidence inv_123; 1 duplicate write prevented',
      );
      const verdict = await text('#verdict-facts');
      expect(verdict).toContain('verification');
      expect(verdict).toMatch(/revision 7, event [0-9a-f-]{36}/);

      // Ten stored events, six rows: each fact with the transition it caused.
      const rows = page.locator('#timeline tbody tr.event');
      expect(await rows.count()).toBe(6);
      const cells = async (index: number) =>
        (await rows.nth(index).locator('td').allInnerTexts()).map((cell) => cell.trim());
      expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td')?.textContent))).toEqual([
        '0–1',
        '2–3',
        '4–5',
        '6',
        '7–8',
        '9',
      ]);
      const refused = await cells(3);
      expect(refused[2]).toContain('DispatchRefused');
      expect(refused[2]).toContain('dispatch of attempt 2 refused: VERIFY_BEFORE_RETRY');
      expect(refused[3]).toBe('verifying');
      expect(refused[4]).toBe('VERIFY_BEFORE_RETRY');
      expect((await cells(4))[3]).toBe('succeeded');
      expect((await cells(4))[4]).toBe('VERIFIED_COMMITTED → next none');
      // A prevented duplicate is the ledger protecting the write, styled as such, not as a failure.
      expect((await cells(5))[2]).toContain('duplicate write prevented');
      expect(await rows.nth(5).getAttribute('class')).toContain('row-tone-protection');
      expect(await rows.nth(3).getAttribute('class')).toContain('row-tone-blocked');
      const states = await Promise.all([0, 1, 2, 3, 4, 5].map(async (index) => (await cells(index))[3]));
      expect(states).toEqual(['planned', 'dispatched', 'verifying', 'verifying', 'succeeded', 'succeeded']);
      // Times are relative and absolute.
      expect((await cells(0))[1]).toMatch(/^just now\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} UTC\s+\+0 ms$/);
      // The raw events are one click away.
      await page.click('#toggle-raw');
      expect(await page.locator('#raw-events tr.raw-row').count()).toBe(10);
      await page.click('#toggle-raw');

      const times = page.locator('#state-times .state-time');
      expect(await times.count()).toBe(4);
      expect((await times.allInnerTexts()).map((line) => line.split(/\s+/)[0])).toEqual([
        'planned',
        'dispatched',
        'verifying',
        'succeeded',
      ]);
      expect(await times.nth(3).innerText()).toContain('terminal since');

      // The proof link opens the verification's row: its data, and the state the ledger folded at it.
      await page.click('.proof-link');
      const detail = page.locator('#timeline tr.detail');
      await detail.locator('.as-of dl').waitFor();
      expect(await detail.innerText()).toContain('State as of revision 8');
      expect(await detail.locator('.as-of').innerText()).toMatch(/Status\s+succeeded/);
      expect(await detail.locator('pre').first().innerText()).toContain('"evidence_ref": "inv_123"');
      await page.screenshot({ path: join(DOCS, 'ui-operation.png'), fullPage: true });
    });

    it("shows a run's steps at a glance and opens a step from it", async () => {
      await page.click(`#op-facts a[href="#/run/${RUN}"]`);
      await page.locator('#run-view').waitFor();
      await page.locator('#run-steps tbody tr').nth(2).waitFor();
      expect(await text('#run-title')).toBe(`Run ${RUN}`);
      expect(await text('#run-open')).toBe('1 of 3 steps open');
      const steps = await page.locator('#run-steps tbody tr').allInnerTexts();
      expect(steps).toHaveLength(3);
      expect(steps[0]).toMatch(new RegExp(`^${RUN}/step_4\\s+create_invoice\\s+write\\s+succeeded`));
      expect(steps[1]).toMatch(/send_email\s+write\s+succeeded/);
      expect(steps[2]).toMatch(/send_email\s+write\s+needs input/);
      await page.screenshot({ path: join(ARTIFACTS, 'ui-run.png'), fullPage: true });

      await page.click(`#run-steps a[href="#/operation/${encodeURIComponent(`${RUN}/step_6`)}"]`);
      await page.locator('#op-title', { hasText: `${RUN}/step_6` }).waitFor();
      await page.locator('#timeline tbody tr.event').first().waitFor();
      expect(await text('#op-status')).toBe('needs input');
      expect(await text('#verdict-statement')).toContain('needs corrected input');
    });

    it('shows the trust metrics of the tenant', async () => {
      await page.click('#show-trust');
      await page.locator('#trust-view').waitFor();
      await page.locator('#trust-overall .tile').first().waitFor();
      const tiles = await page.locator('#trust-overall .tile').allInnerTexts();
      const tile = (label: string) => tiles.find((candidate) => candidate.includes(label)) ?? '';
      expect(tile('Duplicate writes prevented')).toMatch(/^1\s/);
      expect(tile('Identical retries blocked')).toMatch(/^1\s/);
      expect(tile('Unknown outcomes')).toMatch(/^1\s/);
      expect(tile('Resolved by lookup')).toMatch(/^1\s/);
      const tools = await page.locator('#trust-tools tbody tr').allInnerTexts();
      expect(tools.map((row) => row.split(/\s+/)[0])).toEqual(['create_invoice', 'send_email']);
      await page.screenshot({ path: join(ARTIFACTS, 'ui-trust.png'), fullPage: true });

      // Each tile opens the operations it counts.
      const listed = async () =>
        page.locator('#operations-table tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-ref')));
      await page.locator('#trust-overall a.tile', { hasText: 'Duplicate writes prevented' }).click();
      await page.locator(`#operations-table tr[data-ref="${INCIDENT}"]`).waitFor();
      expect(await listed()).toEqual([INCIDENT]);
      expect(await page.inputValue('#operations-filters select[name=has]')).toBe('duplicates_prevented');
      await page.goBack();
      await page.locator('#trust-overall a.tile', { hasText: 'Identical retries blocked' }).click();
      await page.locator(`#operations-table tr[data-ref="${RUN}/step_6"]`).waitFor();
      expect(await listed()).toEqual([`${RUN}/step_6`]);
    });

    it('sent the key only in the Authorization header, never in a URL, and hit no error on the page', async () => {
      expect(requests.length).toBeGreaterThan(0);
      for (const sent of requests) expect(sent.url).not.toContain(AUDITOR_KEY);
      const apiCalls = requests.filter((sent) => new URL(sent.url).pathname.startsWith('/v1/'));
      expect(apiCalls.length).toBeGreaterThan(5);
      // The first calls went before a key was typed; every one after the first keyed call carried it.
      const firstKeyed = apiCalls.findIndex((sent) => sent.authorization !== undefined);
      expect(firstKeyed).toBeGreaterThan(0);
      expect(apiCalls.slice(firstKeyed).every((sent) => sent.authorization === `Bearer ${AUDITOR_KEY}`)).toBe(true);
      expect(requests.every((sent) => new URL(sent.url).origin === ledger.baseUrl)).toBe(true);
      expect(page.url()).not.toContain(AUDITOR_KEY);
      expect(problems).toEqual([]);
    });
  });
});

describe("the operator's actions", () => {
  /**
   * The console's operator actions in Debian's Chromium against the built service (docs/contract.md
   * §4.10), at 1,440 and 390 px: after "Use key" the header shows the key's role; the step's context
   * (tool, planned input as recorded, the last envelope's messages and safe details, attempts) is
   * shown before any action; only the actions the state allows are offered, disabled with the reason
   * for a role that may not use them; an escalated unknown outcome is driven to a terminal state with
   * its evidence on record. Screenshots for the docs are written by `npm run screenshots`.
   */
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
        env: {
          LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${AUDITOR_KEY}:auditor:acme`,
        },
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

    it('draws an operation while the served OpenAPI document does not answer, its actions unfiltered', async () => {
      // The document the actions are filtered by (served-facts.js) stalls: the page must not wait on it.
      let asked = 0;
      await page.route('**/docs/openapi.json', () => {
        asked += 1;
      });
      try {
        await page.goto(`${ledger.baseUrl}/ui#/operation/${encodeURIComponent(REF)}`);
        await page.reload();
        await page.locator('#operation-view:not([hidden]) #op-title', { hasText: REF }).waitFor();
        await page.locator('#operator-card button#op-action-found').waitFor();
        expect(asked).toBeGreaterThan(0);
      } finally {
        await page.unroute('**/docs/openapi.json');
      }
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
      const events = await request(
        ledger.baseUrl,
        'GET',
        `/v1/operations/${encodeURIComponent(REF)}/events`,
        undefined,
        {
          authorization: `Bearer ${AUDITOR_KEY}`,
        },
      );
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
        env: {
          LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${AUDITOR_KEY}:auditor:acme`,
        },
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

    it('offers cancel only for escalations whose outcome is known, says why before anything is picked, records the picks in one request and says each result in words; takes an acknowledged one over only with reassign', async () => {
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
      // A key that may not record operator facts is told so before it picks anything.
      await useKey(AUDITOR_KEY);
      await page.locator('#triage-table input.bulk-pick').nth(1).waitFor();
      await page.locator('#bulk-denied', { hasText: 'An auditor key may not record operator facts' }).waitFor();
      expect(await page.locator('#bulk-ack').isDisabled()).toBe(true);
      expect(await page.locator('#bulk-cancel').isDisabled()).toBe(true);
      await useKey(OPERATOR_KEY);
      await page.locator('#bulk-denied').waitFor({ state: 'hidden' });
      expect(await page.locator('#bulk-ack').isDisabled()).toBe(false);
      // Before anything is picked, the row whose outcome is unknown says it cannot be cancelled yet.
      expect(await page.innerText(`#triage-table tr[data-ref="${unknown}"] .no-cancel`)).toContain(
        'it cannot be cancelled yet',
      );
      expect(await page.locator(`#triage-table tr[data-ref="${known}"] .no-cancel`).count()).toBe(0);
      const posts: string[] = [];
      page.on('request', (sent) => {
        if (sent.method() === 'POST') posts.push(new URL(sent.url()).pathname);
      });
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
      // One request for the picks (POST /v1/operator-facts), not one submit per operation.
      expect(posts).toEqual(['/v1/operator-facts']);
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
      expect(posts).toEqual(['/v1/operator-facts', '/v1/operator-facts']);

      // Someone has it now: acknowledging it for another is not offered until "reassign" is ticked.
      await page.goto(`${ledger.baseUrl}/ui#/triage?kind=acknowledged&q=${encodeURIComponent(`${RUN}/bulk_`)}`);
      // The new hash redraws the queue once its list answers: the pick to tick is the redrawn row's,
      // which says who has it (until then the previous list's row, with no assignee, is on the page).
      await page.check(`#triage-table input.bulk-pick[data-ref="${unknown}"][data-assignee="ana"]`);
      await page.fill('#bulk-form input[name=assignee]', 'ana');
      expect(await page.locator('#bulk-ack').isDisabled()).toBe(false);
      expect(await page.locator('#bulk-reassign').isHidden()).toBe(true);
      await page.fill('#bulk-form input[name=assignee]', 'bo');
      expect(await page.locator('#bulk-ack').isDisabled()).toBe(true);
      expect(await page.innerText('#bulk-ack-hint')).toBe(
        `ana has ${unknown}: tick \u201creassign\u201d to take it over, or acknowledge as them.`,
      );
      await page.check('#bulk-form input[name=reassign]');
      expect(await page.locator('#bulk-ack').isDisabled()).toBe(false);
      expect(await page.locator('#bulk-ack-hint').isHidden()).toBe(true);
      await page.fill('#bulk-form input[name=reason]', 'ana is off shift');
      await page.click('#bulk-ack');
      await page
        .locator('#bulk-results li.ok', { hasText: `${unknown}: Reassigned: bo has it; now escalated` })
        .waitFor();
      expect(posts).toEqual(['/v1/operator-facts', '/v1/operator-facts', '/v1/operator-facts']);
      // Taken over, and the tick is not carried to the next picks.
      const held = await request(
        ledger.baseUrl,
        'GET',
        `/v1/triage?kind=acknowledged&q=${encodeURIComponent(unknown)}`,
        undefined,
        { authorization: `Bearer ${OPERATOR_KEY}` },
      );
      expect(held.body.items[0].acknowledged.assignee).toBe('bo');
      await page.locator('#bulk-reassign').waitFor({ state: 'hidden' });
      expect(await page.locator('#bulk-form input[name=reassign]').isChecked()).toBe(false);
    });
  });
});

describe('the ledger goes away and comes back', () => {
  /**
   * The console when the ledger goes away and comes back (README, "Incident console": watch it
   * live), in Debian's Chromium against the built service: the service process is stopped under
   * an open page, which then says so in a banner and shows "reconnecting" instead of a page that
   * looks live; the service is started again on the same port and data directory, and the page is
   * live again within 2 s of the ledger answering, with what the ledger recorded meanwhile.
   */
  const RUN = `run_${randomUUID().slice(0, 6)}`;
  const PLAN = { run_id: RUN, tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:outage' };

  let ledger: LedgerProcess;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const problems: string[] = [];

  describeInBrowser('the console: the ledger goes away and comes back', () => {
    beforeAll(async () => {
      ledger = await startLedger();
      await submitFact(ledger.baseUrl, `${RUN}/before`, 'StepPlanned', PLAN);
      profile = mkdtempSync(join(tmpdir(), 'ledger-outage-profile-'));
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
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

    it('says the ledger is not answering, then is live again within 2 s of its return', async () => {
      await page.goto(`${ledger.baseUrl}/ui#/operations`);
      await page.locator('#freshness.is-live').waitFor();
      await page.locator('#operations-view', { hasText: `${RUN}/before` }).waitFor();
      expect(await page.isHidden('#outage')).toBe(true);

      await ledger.stop();
      await page.locator('#outage').waitFor({ state: 'visible' });
      expect(await page.innerText('#outage')).toMatch(
        /^The ledger (is not answering \(no answer|cannot serve this page \(HTTP 503) since .+\)\. This page shows the ledger as of .+ and may be out of date\. Reconnecting…$/,
      );
      expect(await page.innerText('#freshness')).toMatch(/^reconnecting · fresh as of /);
      expect(await page.getAttribute('#freshness', 'class')).toContain('is-reconnecting');
      await page.screenshot({ path: join(screenshotDir(), 'ui-outage.png') });
      // At 390 px the banner is on the first screen, and nothing is wider than it.
      await page.setViewportSize({ width: 390, height: 844 });
      const banner = await page.locator('#outage').evaluate((element) => element.getBoundingClientRect().bottom);
      expect(banner).toBeLessThanOrEqual(844);
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBe(390);
      await page.screenshot({ path: join(screenshotDir(), 'ui-outage-390.png') });
      await page.setViewportSize({ width: 1440, height: 900 });

      ledger = await ledger.restart();
      const answering = Date.now();
      // Recorded while the page was still reconnecting: it shows once the page is live again.
      await submitFact(ledger.baseUrl, `${RUN}/after`, 'StepPlanned', PLAN);
      await page.locator('#freshness.is-live').waitFor({ timeout: Math.max(1, 2_000 - (Date.now() - answering)) });
      expect(await page.isHidden('#outage')).toBe(true);
      await page.locator('#operations-view', { hasText: `${RUN}/after` }).waitFor();
      expect(problems).toEqual([]);
    });
  });
});

describe('the Webhooks tab', () => {
  /**
   * The console's Webhooks tab with an admin key, in Debian's Chromium against the built service and
   * real receivers on loopback (docs/webhooks.md, "Resend and test events"): each delivery says where
   * it goes, when it is tried next and the network's reason it failed; an admin sends a test event to
   * a subscription and resends a failed delivery from the page; an auditor sees neither the
   * addresses nor the reasons, and is offered no action.
   */
  const RUNTIME_KEY = 'ui-hooks-runtime-key-000001';
  const ADMIN_KEY = 'ui-hooks-admin-key-00000001';
  const AUDITOR_KEY = 'ui-hooks-auditor-key-000001';
  const RUN = `run_${randomUUID().slice(0, 6)}`;

  let ledger: LedgerProcess;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const servers: Server[] = [];
  const problems: string[] = [];

  async function receiver(port = 0): Promise<{ url: string; types: string[] }> {
    const types: string[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        types.push(JSON.parse(Buffer.concat(chunks).toString('utf8')).type);
        res.writeHead(204).end();
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, types };
  }

  async function useKey(key: string): Promise<void> {
    await page.fill('#api-key', key);
    await page.click('#key-form button[type=submit]');
  }

  describeInBrowser('the console: the Webhooks tab', () => {
    let downPort: number;
    let live: { url: string; types: string[] };

    beforeAll(async () => {
      ledger = await startLedger({
        env: {
          LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme,${AUDITOR_KEY}:auditor:acme`,
          LEDGER_WEBHOOK_RETRY_BASE_MS: '600000',
          LEDGER_WEBHOOK_ALLOW_PRIVATE: '1',
        },
      });
      downPort = await freePort();
      live = await receiver();
      const admin = { authorization: `Bearer ${ADMIN_KEY}` };
      for (const url of [`http://127.0.0.1:${downPort}/hooks`, live.url]) {
        const created = await request(ledger.baseUrl, 'POST', '/v1/admin/webhooks', { url }, admin);
        if (created.status !== 201) throw new Error(`subscribe: ${created.status} ${JSON.stringify(created.body)}`);
      }
      await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${RUN}/pay_1`, RUN, 'pay_invoice');
      await until(
        async () =>
          (await request(ledger.baseUrl, 'GET', '/v1/webhooks/deliveries', undefined, admin)).body.deliveries as any[],
        (all) => all.length === 2 && all.every((delivery) => delivery.attempts >= 1),
        'one attempt of each delivery',
      );
      profile = mkdtempSync(join(tmpdir(), 'ledger-hooks-profile-'));
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
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
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    });

    it('an admin sees where each delivery goes, why it failed and when it is tried next; sends a test event; resends', async () => {
      await page.goto(`${ledger.baseUrl}/ui#/webhooks`);
      await useKey(ADMIN_KEY);
      await page.locator('#webhook-subscriptions tbody tr').nth(1).waitFor();
      const failedRow = page.locator('#webhook-table tbody tr.delivery-pending', { hasText: 'ECONNREFUSED' });
      await failedRow.waitFor();
      const failed = await failedRow.innerText();
      expect(failed).toContain(`http://127.0.0.1:${downPort}/hooks`);
      expect(failed).toMatch(/ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:\d+/);
      expect(await failedRow.locator('td[data-label="Next try"]').innerText()).toMatch(/\d{4}-\d{2}-\d{2}/);
      expect(await page.locator('#webhook-table tbody tr.delivery-delivered').innerText()).toContain(live.url);

      await page
        .locator('#webhook-subscriptions tbody tr', { hasText: live.url })
        .getByRole('button', { name: 'Send test event' })
        .click();
      await page.locator('#webhook-action-result', { hasText: 'queued for' }).waitFor();
      await until(
        async () => live.types,
        (types) => types.includes('webhook.test'),
        'the test event at the receiver',
      );
      await page.screenshot({ path: join(screenshotDir(), 'ui-webhooks-admin.png'), fullPage: true });
      // At 390 px the same, as cards, nothing wider than the screen.
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBe(390);
      expect(await page.isVisible('#webhook-subscriptions button')).toBe(true);
      await page.screenshot({ path: join(screenshotDir(), 'ui-webhooks-admin-390.png'), fullPage: true });
      await page.setViewportSize({ width: 1440, height: 900 });

      // The receiver that was down comes up: a resend delivers now, not in ten minutes.
      const revived = await receiver(downPort);
      await failedRow.getByRole('button', { name: 'Resend' }).click();
      await page.locator('#webhook-action-result', { hasText: 'will be sent again now' }).waitFor();
      await until(
        async () => revived.types,
        (types) => types.includes('step.escalated'),
        'the resent delivery at the receiver',
      );
      // Deliveries are not in the log the page follows: it reads them again when it is opened.
      await until(
        async () => {
          await page.reload();
          await page.locator('#webhook-table tbody tr').first().waitFor();
          return page.locator('#webhook-table tbody tr.delivery-pending').count();
        },
        (count) => count === 0,
        'no delivery pending on the page',
      );
      expect(problems).toEqual([]);
    });

    it('an auditor sees the deliveries without addresses or reasons, and no action', async () => {
      await useKey(AUDITOR_KEY);
      await page.locator('#key-role', { hasText: 'role auditor' }).waitFor();
      await page.locator('#webhook-subscriptions-note', { hasText: 'An admin key lists the subscriptions' }).waitFor();
      expect(await page.isHidden('#webhook-subscriptions')).toBe(true);
      expect(await page.locator('#webhook-table button').count()).toBe(0);
      const text = await page.locator('#webhook-table').innerText();
      expect(text).not.toContain('127.0.0.1');
      expect(text).not.toContain('ECONNREFUSED');
    });
  });
});
