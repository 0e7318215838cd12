/**
 * Every citation points into the repository: no comment or document cites a document that is not
 * in it ("SPEC §n", "STYLE §n", "SPEC.md", "the seed"), and every `docs/contract.md §N` names a
 * section that docs/contract.md has.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');

/** The folders and files scanned: every place a comment or a document can cite something. */
export const CITATION_SCANNED_PATHS: readonly string[] = [
  'docs',
  'src',
  'packages',
  'test',
  'README.md',
  'clients',
  'examples',
  'bench',
  '.dependency-cruiser.cjs',
];

/**
 * Citations of documents that are not in the repository. "The seed" as the source article, not
 * as a random seed ("the seed fixes the schedule", "replayed from the seed" stay allowed).
 */
const FOREIGN = [
  /\bSPEC §/,
  /\bSTYLE §/,
  /\bSPEC\.md\b/,
  /\bthe seed(?:'s|:| envelopes?\b| contract\b)/i,
  /\b(?:of|from) the seed(?:,|\)|$)/i,
];
const CONTRACT_SECTION = /docs\/contract\.md §(\d+)/g;
const TEXT = /\.(ts|js|cjs|mjs|md|json|py)$/;
// This file names the patterns it looks for.
const SELF = relative(ROOT, __filename);

function files(path: string): string[] {
  const stat = statSync(path);
  if (stat.isFile()) return TEXT.test(path) ? [path] : [];
  return readdirSync(path).flatMap((entry) =>
    entry === 'node_modules' || entry === 'dist' ? [] : files(join(path, entry)),
  );
}

const contractSections = new Set(
  [...readFileSync(join(ROOT, 'docs/contract.md'), 'utf8').matchAll(/^## (\d+)\. /gm)].map((match) => Number(match[1])),
);

const lines = CITATION_SCANNED_PATHS.flatMap((path) => files(join(ROOT, path)))
  .filter((file) => relative(ROOT, file) !== SELF)
  .flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((text, index) => ({ at: `${relative(ROOT, file)}:${index + 1}`, text })),
  );

describe('citations', () => {
  it('docs/contract.md has the sections 1 to 9', () => {
    expect([...contractSections].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('cite no document that is not in the repository', () => {
    const foreign = lines
      .filter(({ text }) => FOREIGN.some((pattern) => pattern.test(text)))
      .map(({ at, text }) => `${at}: ${text.trim()}`);
    expect(foreign).toEqual([]);
  });

  it('cite only sections docs/contract.md has', () => {
    const dangling = lines.flatMap(({ at, text }) =>
      [...text.matchAll(CONTRACT_SECTION)]
        .filter((match) => !contractSections.has(Number(match[1])))
        .map((match) => `${at}: ${match[0]}`),
    );
    expect(dangling).toEqual([]);
  });

  it('recognise what they look for (the scan is live)', () => {
    expect(FOREIGN.some((pattern) => pattern.test('The rules of SPEC §4 live in one place'))).toBe(true);
    expect(FOREIGN.some((pattern) => pattern.test("the seed's state machine"))).toBe(true);
    expect(FOREIGN.some((pattern) => pattern.test('The seed: even a 200 can contain a failure'))).toBe(true);
    expect(FOREIGN.some((pattern) => pattern.test('The four questions of the seed, in one line per case'))).toBe(true);
    expect(FOREIGN.some((pattern) => pattern.test('The client gossips with the seeds'))).toBe(false);
    expect(FOREIGN.some((pattern) => pattern.test('The seed fixes the schedule and the clients'))).toBe(false);
    expect(FOREIGN.some((pattern) => pattern.test('any moment can be reproduced from the seed.'))).toBe(false);
    expect([...'see docs/contract.md §12'.matchAll(CONTRACT_SECTION)].map((match) => Number(match[1]))).toEqual([12]);
  });
});
