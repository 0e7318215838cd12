import { defineConfig } from 'tsup';

/**
 * One self-contained file per module format: the core's parts the client uses (envelope rules,
 * canonical JSON, contract types) are bundled in, so the installed package needs nothing else.
 */
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['cjs', 'esm'],
  platform: 'node',
  target: 'node20',
  dts: { resolve: [/^@recovery-ledger\/core/] },
  noExternal: [/^@recovery-ledger\/core/],
  // Not minified, so a stack trace into the bundle reads as the source does; no maps to ship.
  sourcemap: false,
  clean: true,
  splitting: false,
  treeshake: true,
  // __filename in the ESM build too: the optional OpenTelemetry API is required from there (src/telemetry.ts).
  shims: true,
});
