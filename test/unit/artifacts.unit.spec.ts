import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { envelopeJsonSchema } from '@recovery-ledger/core';

const committed = (file: string) => readFileSync(resolve(__dirname, '../..', file), 'utf8');

describe('generated artefacts are committed and current', () => {
  it('schema/envelope.schema.json is what the code generates (run `npm run generate`)', () => {
    expect(committed('schema/envelope.schema.json')).toBe(`${JSON.stringify(envelopeJsonSchema(), null, 2)}\n`);
  });

  it('openapi.json is what the controllers generate (run `npm run generate`)', () => {
    // The function the generator writes with, on an application that is built but never listens.
    // It runs on the build (npm test builds first): NestJS 12 is ESM, which jest on Node 20 cannot load.
    const built = resolve(__dirname, '../../dist/tools/openapi-artifact.js');
    if (!existsSync(built)) throw new Error(`${built} is missing: build first (npx tsc -p tsconfig.build.json)`);
    const script = `require(${JSON.stringify(built)}).generateOpenApiDocument().then((d) => process.stdout.write(JSON.stringify(d, null, 2) + '\\n'))`;
    const generated = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    expect(committed('openapi.json')).toBe(generated);
  });
});
