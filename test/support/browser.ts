import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** Debian's Chromium (`apt-get install chromium`); LEDGER_CHROMIUM points at another build. */
export const CHROMIUM = process.env.LEDGER_CHROMIUM ?? '/usr/bin/chromium';

/** Set by .ci/run: there a missing browser fails the run instead of skipping the tier. */
export const BROWSER_REQUIRED = process.env.LEDGER_REQUIRE_BROWSER === '1';

export const BROWSER_SKIP_LINE =
  `browser tier skipped: ${CHROMIUM} is missing. To run it: apt-get install chromium ` +
  `(or LEDGER_CHROMIUM=/path/to/chromium), then npx jest test/e2e/ui-`;

/**
 * `describe` for the tests that drive a real browser. Where Chromium is, they run. Where it is
 * not, a fresh machine's `npm test` still passes: the block is skipped and one line says how to run
 * it; unless LEDGER_REQUIRE_BROWSER=1, where the missing browser is one failing test, never a
 * silent skip.
 */
export function describeInBrowser(name: string, body: () => void): void {
  if (existsSync(CHROMIUM)) {
    describe(name, body);
    return;
  }
  if (BROWSER_REQUIRED) {
    describe(name, () => {
      it(`needs Chromium at ${CHROMIUM} (LEDGER_REQUIRE_BROWSER=1)`, () => {
        throw new Error(BROWSER_SKIP_LINE.replace('browser tier skipped', 'browser tier required'));
      });
    });
    return;
  }
  // Written directly: console.log inside Jest adds a stack frame, and this is meant as one line.
  process.stderr.write(`${BROWSER_SKIP_LINE}\n`);
  describe.skip(name, body);
}

/**
 * Where the browser tests write their screenshots: the docs' own copies only when asked
 * (LEDGER_UPDATE_SCREENSHOTS=1, `npm run screenshots`), otherwise a scratch directory, so a test
 * run leaves the working tree as it found it.
 */
export function screenshotDir(): string {
  if (process.env.LEDGER_UPDATE_SCREENSHOTS === '1') return resolve(__dirname, '../../docs');
  const dir = join(tmpdir(), 'recovery-ledger-screenshots');
  mkdirSync(dir, { recursive: true });
  return dir;
}
