/**
 * The console's Webhooks tab with an admin key, in Debian's Chromium against the built service and
 * real receivers on loopback (docs/webhooks.md, "Resend and test events"): each delivery says where
 * it goes, when it is tried next and the network's reason it failed; an admin sends a test event to
 * a subscription and resends a failed delivery from the page; an auditor sees neither the
 * addresses nor the reasons, and is offered no action.
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
import { incidentsAt } from '../support/incidents';
import { freePort, startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

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
