/**
 * A build-time tool, outside the runtime tree (nothing in src imports it); it runs from dist/tools.
 * Writes the generated artefacts that are committed beside the code: the envelope's JSON Schema
 * (and, when the OpenAPI generator is present, the OpenAPI document). `npm run generate` refreshes
 * them; test/unit/artifacts.unit.spec.ts fails when a committed one drifts from the code.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { envelopeJsonSchema } from '@recovery-ledger/core';
import { generateOpenApiDocument } from './openapi-artifact';

export const ENVELOPE_SCHEMA_FILE = resolve(__dirname, '../../schema/envelope.schema.json');
export const OPENAPI_FILE = resolve(__dirname, '../../openapi.json');

export function renderJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

if (require.main === module) {
  writeFileSync(ENVELOPE_SCHEMA_FILE, renderJson(envelopeJsonSchema()));
  process.stdout.write(`wrote ${ENVELOPE_SCHEMA_FILE}\n`);
  void generateOpenApiDocument().then((document) => {
    writeFileSync(OPENAPI_FILE, renderJson(document));
    process.stdout.write(`wrote ${OPENAPI_FILE}\n`);
  });
}
