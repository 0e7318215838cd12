/**
 * Writes the vectors both SDKs are checked against, each expected value computed here by the
 * TypeScript implementation: the canonical input hash, Retry-After, secret redaction, and the
 * hostile-upstream corpus the normalizers must neutralise. Rerun after changing any of them:
 *   node --require ./test/chaos/swc-register.cjs test/vectors/generate-vectors.ts
 * test/unit/client/shared-vectors.unit.spec.ts fails when a file and the code disagree.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inputHash, normalizeHttpResponse, normalizeMcpToolResult, retryAfterMs } from '@recovery-ledger/client';
import { canonicalJson, redactText } from '@recovery-ledger/core';
import { HOSTILE_UPSTREAM_TEXTS, TELLTALES } from '../unit/client/support/hostile-upstream-texts';
import { SECRET_CORPUS } from '../support/secret-corpus';
import {
  CANONICAL_INPUTS,
  HTTP_CASES,
  MCP_CASES,
  NORMALIZER_NOW,
  REDACTION_EXTRA_TEXTS,
  RETRY_AFTER_NOW,
  RETRY_AFTER_VALUES,
} from './vector-inputs';
import { normalizerVectors } from './normalizer-vectors';

function write(name: string, value: unknown): void {
  writeFileSync(join(__dirname, name), `${JSON.stringify(value, null, 2)}\n`);
}

write('canonical-input-hash.json', {
  about:
    "input_json is parsed by each language's standard JSON parser; canonical is canonicalJson of the parsed value and sha256 the SDK input hash (hex SHA-256 of its UTF-8 bytes). Generated from the TypeScript implementation by generate-vectors.ts.",
  vectors: CANONICAL_INPUTS.map(([name, inputJson]) => {
    const value = JSON.parse(inputJson) as unknown;
    return { name, input_json: inputJson, canonical: canonicalJson(value), sha256: inputHash(value) };
  }),
});

write('retry-after.json', {
  about:
    'retry_after_ms(value, now); null where the header is absent or neither delay-seconds nor an HTTP-date in GMT.',
  now: RETRY_AFTER_NOW,
  vectors: RETRY_AFTER_VALUES.map((value) => ({ value, ms: retryAfterMs(value, new Date(RETRY_AFTER_NOW)) ?? null })),
});

write('redaction.json', {
  about: 'redactText(text): the text with each secret replaced by [REDACTED:kind], and the kinds in the order found.',
  vectors: [...SECRET_CORPUS.map(([, text]) => text), ...HOSTILE_UPSTREAM_TEXTS, ...REDACTION_EXTRA_TEXTS].map(
    (text) => {
      const { text: redacted, kinds } = redactText(text);
      return { text, redacted, kinds };
    },
  ),
});

write('injection-corpus.json', {
  about:
    'Upstream texts written to read as instructions, leaks or false statuses; no telltale may appear in any envelope a normalizer builds from them.',
  hostile_texts: HOSTILE_UPSTREAM_TEXTS,
  telltales: TELLTALES,
});

write('normalizers.json', {
  about:
    'The envelope each normalizer gives for each case, at the fixed now, operation_ref run_81/step_4. MCP cases always name allowed_codes: without it the SDKs differ by design (docs/sdk-python.md).',
  now: NORMALIZER_NOW,
  ...normalizerVectors(HTTP_CASES, MCP_CASES, normalizeHttpResponse, normalizeMcpToolResult),
});
