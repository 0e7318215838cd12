/**
 * The committed OpenAPI document passes Spectral's `spectral:oas` ruleset (its recommended rules)
 * with no error and no warning. Among them, oas3-valid-media-example checks every example
 * against its schema, so the submit examples must be facts of the types they say they are.
 * (artifacts.unit.spec.ts checks that the committed document is the generated one.)
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Document, Spectral } from '@stoplight/spectral-core';
import * as Parsers from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';

const FILE = resolve(__dirname, '../../openapi.json');

async function lint(text: string) {
  const spectral = new Spectral();
  spectral.setRuleset({ extends: [[oas as never, 'recommended']] });
  const results = await spectral.run(new Document(text, Parsers.Json, FILE));
  return results.map(
    (result) =>
      `${['error', 'warning', 'info', 'hint'][result.severity]} ${result.code} at ${result.path.join('.')}: ${result.message}`,
  );
}

describe('openapi.json under spectral:oas', () => {
  it('has no error, warning, info or hint', async () => {
    expect(await lint(readFileSync(FILE, 'utf8'))).toEqual([]);
  });

  it('would report an example that does not fit its fact type (the check is live)', async () => {
    const document = JSON.parse(readFileSync(FILE, 'utf8'));
    const examples =
      document.paths['/v1/operations/{ref}/events'].post.requestBody.content['application/json'].examples;
    examples.dispatch.value.events[0].data.attempt = 0;
    expect(await lint(JSON.stringify(document))).toEqual(
      expect.arrayContaining([expect.stringMatching(/^error oas3-valid-media-example/)]),
    );
  });
});
