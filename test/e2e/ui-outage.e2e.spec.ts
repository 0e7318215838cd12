/**
 * The console when the ledger goes away and comes back (README, "Incident console": watch it
 * live), in Debian's Chromium against the built service: the service process is stopped under
 * an open page, which then says so in a banner and shows "reconnecting" instead of a page that
 * looks live; the service is started again on the same port and data directory, and the page is
 * live again within 2 s of the ledger answering, with what the ledger recorded meanwhile.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, describeInBrowser, screenshotDir } from '../support/browser';
import { submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

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
