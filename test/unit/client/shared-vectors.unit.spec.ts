/**
 * The vectors under test/vectors are what the Python client is checked against too
 * (clients/python/tests): a step planned from one language and resumed from the other must hash its
 * input the same, read Retry-After the same, and redact the same. Each file was generated from this
 * implementation (test/vectors/generate-vectors.ts); this test fails when the code and the files part.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inputHash, normalizeHttpResponse, normalizeMcpToolResult, retryAfterMs } from '@recovery-ledger/client';
import { canonicalJson, redactText } from '@recovery-ledger/core';
import { SECRET_CORPUS } from '../../support/secret-corpus';
import { normalizerVectors } from '../../vectors/normalizer-vectors';
import {
  CANONICAL_INPUTS,
  HTTP_CASES,
  MCP_CASES,
  NORMALIZER_NOW,
  RETRY_AFTER_NOW,
  RETRY_AFTER_VALUES,
} from '../../vectors/vector-inputs';
import { HOSTILE_UPSTREAM_TEXTS, TELLTALES } from './support/hostile-upstream-texts';

const VECTORS = join(__dirname, '../../vectors');
const load = (name: string) => JSON.parse(readFileSync(join(VECTORS, name), 'utf8'));

describe('shared vectors (checked by the Python client too)', () => {
  const hash = load('canonical-input-hash.json') as {
    vectors: Array<{ name: string; input_json: string; canonical: string; sha256: string }>;
  };

  it('lists every canonical input, in order', () => {
    expect(hash.vectors.map((vector) => [vector.name, vector.input_json])).toEqual(
      CANONICAL_INPUTS.map((entry) => [...entry]),
    );
  });

  it.each(hash.vectors.map((vector) => [vector.name, vector]))('canonical input hash: %s', (_name, vector) => {
    const value = JSON.parse(vector.input_json) as unknown;
    expect(canonicalJson(value)).toBe(vector.canonical);
    expect(inputHash(value)).toBe(vector.sha256);
  });

  it('hashes an input the same whatever its key order or 1000 vs 1000.0', () => {
    const invoice = hash.vectors.filter((vector) => vector.name.startsWith('invoice'));
    expect(invoice).toHaveLength(3);
    expect(new Set(invoice.map((vector) => vector.sha256)).size).toBe(1);
  });

  it('reads Retry-After as the vectors say', () => {
    const file = load('retry-after.json') as {
      now: string;
      vectors: Array<{ value: string | null; ms: number | null }>;
    };
    expect(file.now).toBe(RETRY_AFTER_NOW);
    expect(file.vectors.map((vector) => vector.value)).toEqual([...RETRY_AFTER_VALUES]);
    for (const vector of file.vectors) {
      expect({ value: vector.value, ms: retryAfterMs(vector.value, new Date(file.now)) ?? null }).toEqual(vector);
    }
  });

  it('redacts as the vectors say', () => {
    const file = load('redaction.json') as { vectors: Array<{ text: string; redacted: string; kinds: string[] }> };
    for (const text of [...SECRET_CORPUS.map(([, sent]) => sent), ...HOSTILE_UPSTREAM_TEXTS]) {
      expect(file.vectors.some((vector) => vector.text === text)).toBe(true);
    }
    for (const vector of file.vectors) {
      const { text, kinds } = redactText(vector.text);
      expect({ text: vector.text, redacted: text, kinds }).toEqual(vector);
    }
  });

  it('carries the same injection corpus as the TypeScript normalizer tests', () => {
    const file = load('injection-corpus.json') as { hostile_texts: string[]; telltales: string[] };
    expect(file.hostile_texts).toEqual([...HOSTILE_UPSTREAM_TEXTS]);
    expect(file.telltales).toEqual([...TELLTALES]);
  });

  it('normalizes HTTP answers and MCP results as the vectors say', () => {
    const file = load('normalizers.json') as { now: string };
    expect(file.now).toBe(NORMALIZER_NOW);
    expect(file).toEqual({
      about: expect.any(String),
      now: NORMALIZER_NOW,
      ...JSON.parse(
        JSON.stringify(normalizerVectors(HTTP_CASES, MCP_CASES, normalizeHttpResponse, normalizeMcpToolResult)),
      ),
    });
  });
});
