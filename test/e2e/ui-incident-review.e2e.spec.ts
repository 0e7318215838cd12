/**
 * The incident console (/ui) in headless Chromium against the built service: a reviewer with an
 * auditor key opens the contract's incident, reads the verdict, the story with each fact and the
 * transition it caused on one row, the time in each state, opens the run and the trust metrics.
 * The key goes out in the Authorization header only. The operation's screenshot is written to
 * docs/ (the README shows it), the others to test-artifacts/.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, describeInBrowser, screenshotDir } from '../support/browser';
import { committed, invalidInput, unknownOutcome } from '../support/cli-harness';
import { committedPosition, request, submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

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
    ledger = await startLedger({ env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme` } });

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
