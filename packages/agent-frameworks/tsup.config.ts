import { defineConfig } from 'tsup';

/**
 * Each subpath in both module formats, so an ES-module application and a CommonJS one each load the
 * build of the client, and the declarations of their framework, that they import themselves (the
 * client's errors are recognised by a mark, not by identity, either way: packages/client/src/ledger-errors.ts).
 * The client and the frameworks stay external: the application's own copies are the ones used.
 */
export default defineConfig({
  entry: ['src/ai-sdk.ts', 'src/openai-agents.ts', 'src/langchain.ts', 'src/mastra.ts'],
  format: ['cjs', 'esm'],
  platform: 'node',
  target: 'node20',
  dts: true,
  external: [/^@recovery-ledger\/client/, 'ai', /^@openai\//, /^langchain/, /^@langchain\//, /^@mastra\//],
  // Not minified, so a stack trace reads as the source does; no maps, since the sources are not shipped.
  sourcemap: false,
  clean: true,
  splitting: false,
  treeshake: true,
});
