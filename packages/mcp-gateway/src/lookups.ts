/**
 * The verification lookup of each write tool, by operation_ref: an upstream tool or an HTTP GET,
 * answering `found` (with the provider's id of the write as evidence) or not. Anything else (an
 * error, a timeout, an answer without `found`, found without evidence) is a throw, which verify()
 * records as lookup_unavailable: never a guess.
 */
import type { Lookup, LookupResult } from '@recovery-ledger/client';
import type { LookupConfig } from './gateway-config';
import type { Upstream } from './upstream';

const DEFAULT_LOOKUP_TIMEOUT_MS = 10_000;

function at(value: unknown, path: string): unknown {
  let node = value;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** The found / not found answer, read by the configured field names. */
export function readLookupAnswer(
  body: unknown,
  config: Pick<LookupConfig, 'found_field' | 'evidence_field'>,
): LookupResult {
  const found = at(body, config.found_field);
  if (found === false) return { found: false };
  if (found !== true) throw new Error(`the lookup answer has no boolean ${config.found_field}`);
  const evidence = at(body, config.evidence_field);
  if ((typeof evidence !== 'string' || evidence === '') && typeof evidence !== 'number') {
    throw new Error(`the lookup answered found without ${config.evidence_field}`);
  }
  return { found: true, evidenceRef: String(evidence), result: body };
}

function parsedText(content: unknown): unknown {
  if (!Array.isArray(content)) return undefined;
  const block = content.find((item) => item && typeof item === 'object' && (item as { type?: string }).type === 'text');
  if (!block) return undefined;
  try {
    return JSON.parse((block as { text: string }).text);
  } catch {
    return undefined;
  }
}

export function makeLookup(config: LookupConfig, upstreamOf: (server: string | undefined) => Upstream): Lookup {
  const timeoutMs = config.timeout_ms ?? DEFAULT_LOOKUP_TIMEOUT_MS;
  if ('tool' in config) {
    return async (operationRef) => {
      const upstream = upstreamOf(config.server);
      const result = await upstream.callTool(config.tool, { [config.argument]: operationRef }, timeoutMs);
      if (result.isError) throw new Error(`lookup ${config.tool} answered an error`);
      return readLookupAnswer(result.structuredContent ?? parsedText(result.content), config);
    };
  }
  return async (operationRef) => {
    const url = config.url.replace(/\{operation_ref\}|%7Boperation_ref%7D/g, encodeURIComponent(operationRef));
    const response = await fetch(url, {
      headers: { accept: 'application/json', ...(config.headers ?? {}) },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) throw new Error(`lookup answered ${response.status}`);
    return readLookupAnswer(await response.json(), config);
  };
}
