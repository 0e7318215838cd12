import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');
const ENTRY = join(ROOT, 'packages/client/src/index.ts');
/** The core's entry points, by name (packages/core/package.json `exports`). */
const CORE_ENTRIES: Record<string, string> = {
  '@recovery-ledger/core': 'packages/core/src/index.ts',
  '@recovery-ledger/core/envelope': 'packages/core/src/envelope.ts',
};

/** Packages a runtime may load through the client: Node's own modules, nothing else. */
const allowedPackage = (specifier: string) => specifier.startsWith('node:');

// Value imports and re-exports only: `import type` / `export type` are erased and load nothing.
const IMPORT_PATTERN = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;

function resolveLocal(from: string, specifier: string): string {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  throw new Error(`cannot resolve ${specifier} from ${relative(ROOT, from)}`);
}

/** Every file and package the client loads at run time, following value imports from its entry. */
function runtimeClosure(entry: string): { files: string[]; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(IMPORT_PATTERN)) {
      const specifier = match[1];
      if (specifier.startsWith('.')) visit(resolveLocal(file, specifier));
      // The core's parts are bundled into the client's build (packages/client/tsup.config.ts).
      else if (specifier in CORE_ENTRIES) visit(join(ROOT, CORE_ENTRIES[specifier]));
      else packages.set(specifier, relative(ROOT, file));
    }
  };
  visit(entry);
  return { files: [...files].map((file) => relative(ROOT, file)).sort(), packages };
}

describe('the client stands alone', () => {
  const { files, packages } = runtimeClosure(ENTRY);

  it('loads no package but Node built-ins: no NestJS, no server framework, no driver', () => {
    const foreign = [...packages].filter(([specifier]) => !allowedPackage(specifier));
    expect(foreign).toEqual([]);
  });

  it('takes from the core only the envelope rules, the event vocabularies and shared helpers', () => {
    const outside = files.filter((file) => !file.startsWith('packages/client/src/'));
    expect(outside.length).toBeGreaterThan(0);
    const allowed = (file: string) =>
      file === 'packages/core/src/envelope.ts' ||
      file.startsWith('packages/core/src/domain/envelope/') ||
      file.startsWith('packages/core/src/shared/') ||
      // The events' data, defined once as schema literals, and the identifier pattern they use.
      file.startsWith('packages/core/src/facts/') ||
      file === 'packages/core/src/domain/identifier-grammar.ts' ||
      file === 'packages/core/src/domain/events.ts';
    expect(outside.filter((file) => !allowed(file))).toEqual([]);
  });
});
