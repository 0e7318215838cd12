import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { envelopeJsonSchema } from '../../src/domain/envelope/envelope.schema';
import { generateOpenApiDocument } from '../../src/openapi/openapi-artifact';

const committed = (file: string) => readFileSync(resolve(__dirname, '../..', file), 'utf8');

describe('generated artefacts are committed and current', () => {
  it('schema/envelope.schema.json is what the code generates (run `npm run generate`)', () => {
    expect(committed('schema/envelope.schema.json')).toBe(`${JSON.stringify(envelopeJsonSchema(), null, 2)}\n`);
  });

  it('openapi.json is what the controllers generate (run `npm run generate`)', async () => {
    // The same function the generator writes with, on an application that is built but never listens.
    expect(committed('openapi.json')).toBe(`${JSON.stringify(await generateOpenApiDocument(), null, 2)}\n`);
  });
});
