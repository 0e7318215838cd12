/**
 * Node 24 is the runtime we recommend and Node 20 keeps working (README, "Node versions"): the
 * root's `engines` names the oldest release of each Node line it admits, and no package the root
 * `npm ci` installs may exclude one of them, or that install warns (EBADENGINE) or breaks there.
 * The agent frameworks, some of which need Node 22, are a test project's (test/frameworks) and
 * not in this lock file.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The parts of semver (npm's own range grammar, installed with the tooling) this test reads. */
interface Semver {
  Range: new (range: string) => { set: ReadonlyArray<ReadonlyArray<{ value: string }>> };
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string, options?: { includePrerelease?: boolean }): boolean;
  major(version: string): number;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports -- semver ships no type declarations
const semver = require('semver') as Semver;

const ROOT = resolve(__dirname, '../..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

interface LockedPackage {
  engines?: { node?: string } | string[];
  optional?: boolean;
}

const rootEngines: string = JSON.parse(read('package.json')).engines.node;
/** The oldest release of each Node line the root admits: one per `||` alternative. */
const floors = new semver.Range(rootEngines).set.map((comparators) =>
  String(semver.minVersion(comparators.map((comparator) => comparator.value).join(' '))?.version),
);

describe("the Node versions the root's npm ci installs for", () => {
  it('admits Node 20 and Node 24, the one .nvmrc and the Docker image run', () => {
    const majors = floors.map((floor) => semver.major(floor));
    expect(majors).toEqual(expect.arrayContaining([20, 24]));
    expect(read('.nvmrc').trim()).toBe('24');
    expect(read('Dockerfile')).toMatch(/^FROM node:24-/m);
  });

  it('installs no package whose engines exclude the oldest release of a line it admits', () => {
    const lock: { packages: Record<string, LockedPackage> } = JSON.parse(read('package-lock.json'));
    const excluding = Object.entries(lock.packages).flatMap(([path, locked]) => {
      const range = Array.isArray(locked.engines) ? undefined : locked.engines?.node;
      if (path === '' || range === undefined) return [];
      const excluded = floors.filter((floor) => !semver.satisfies(floor, range, { includePrerelease: true }));
      return excluded.length > 0 ? [`${path.replace(/^.*node_modules\//, '')} (${range}) excludes ${excluded}`] : [];
    });
    expect({ rootEngines, excluding }).toEqual({ rootEngines, excluding: [] });
    expect(lock.packages['']?.engines).toEqual({ node: rootEngines });
  });
});
