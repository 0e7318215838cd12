import type { ToolEnvelope } from '@recovery-ledger/core';
import {
  inputFieldsOf,
  normalizeHttpResponse,
  normalizeMcpToolResult,
  normalizeNetworkError,
} from '@recovery-ledger/client';
import { safeToken, safeTokenList, upstreamError } from '../../../packages/client/src/normalizers/upstream-text';
import {
  expectError,
  expectValid,
  FIXED_AGENT_MESSAGES,
  FIXED_USER_MESSAGES,
  NOW,
  REF,
} from './support/envelope-assertions';
import { HOSTILE_UPSTREAM_TEXTS, TELLTALES } from './support/hostile-upstream-texts';

type SideEffect = 'read' | 'write';

/** Every way a hostile text can arrive at a normalizer, as a failure. */
function channels(text: string, sideEffect: SideEffect): Array<[string, ToolEnvelope]> {
  const options = { operationRef: REF, sideEffect, now: NOW };
  const jsonBody = {
    message: text,
    detail: text,
    error: { message: text, code: text, type: text, field: text, param: text },
  };
  const out: Array<[string, ToolEnvelope]> = [];
  for (const status of [400, 401, 403, 404, 409, 412, 422, 429, 500, 502, 503, 504]) {
    out.push([
      `HTTP ${status} JSON`,
      normalizeHttpResponse({ status, headers: { 'retry-after': text }, body: jsonBody }, options),
    ]);
    out.push([`HTTP ${status} text`, normalizeHttpResponse({ status, body: text }, options)]);
  }
  out.push([
    'HTTP 200 failure body',
    normalizeHttpResponse({ status: 200, body: { ok: false, ...jsonBody } }, options),
  ]);
  out.push(['MCP isError text', normalizeMcpToolResult({ content: [{ type: 'text', text }], isError: true }, options)]);
  out.push([
    'MCP envelope prose',
    normalizeMcpToolResult(
      {
        content: [{ type: 'text', text }],
        isError: true,
        structuredContent: {
          ok: false,
          code: 'PROVIDER_REFUSED',
          category: 'dependency',
          commit_state: 'not_committed',
          retry: { directive: 'never', max_attempts_remaining: 0 },
          next_action: 'escalate',
          operation_ref: REF,
          safe_details: { field: text.slice(0, 200) },
          agent_message: text.slice(0, 400),
          user_message: text.slice(0, 400),
        },
      },
      options,
    ),
  ]);
  out.push([
    'network error',
    normalizeNetworkError(Object.assign(new Error(text), { code: text, cause: new Error(text) }), options),
  ]);
  return out;
}

describe('upstream text never becomes an instruction', () => {
  describe.each(['write', 'read'] as const)('on a %s', (sideEffect) => {
    it.each(HOSTILE_UPSTREAM_TEXTS.map((text) => [text.slice(0, 60), text]))('%s', (_label, text) => {
      for (const [channel, envelope] of channels(text, sideEffect)) {
        const error = expectError(envelope);
        expect({ channel, fixed: FIXED_AGENT_MESSAGES.has(error.agent_message) }).toEqual({ channel, fixed: true });
        expect(FIXED_USER_MESSAGES.has(error.user_message)).toBe(true);
        const serialized = JSON.stringify(envelope);
        for (const telltale of TELLTALES) {
          if (serialized.includes(telltale)) throw new Error(`${channel} let "${telltale}" through: ${serialized}`);
        }
        expectValid(envelope, sideEffect);
      }
    });
  });

  it('an unclassified failure is the neutral UPSTREAM_ERROR with a fixed, factual message', () => {
    const onWrite = upstreamError({ operationRef: REF, sideEffect: 'write', now: NOW });
    expect(onWrite).toMatchObject({
      code: 'UPSTREAM_ERROR',
      commit_state: 'unknown',
      next_action: 'verify_operation',
      agent_message:
        'The tool reported an error; its text was withheld as untrusted. Verify operation_ref before any new write.',
    });
    const onRead = upstreamError({ operationRef: REF, sideEffect: 'read', now: NOW });
    expect(onRead).toMatchObject({ code: 'UPSTREAM_ERROR', commit_state: 'not_committed', next_action: 'escalate' });
  });

  it('redacts secrets from messages a trusted tool is allowed to keep', () => {
    const envelope = normalizeMcpToolResult(
      {
        content: [],
        isError: true,
        structuredContent: {
          ok: false,
          code: 'PROVIDER_REFUSED',
          category: 'dependency',
          commit_state: 'not_committed',
          retry: { directive: 'never', max_attempts_remaining: 0 },
          next_action: 'escalate',
          operation_ref: REF,
          safe_details: {},
          agent_message: 'refused for key sk_live_51HxAbCdEfGhIjKlMnOp',
          user_message: 'Refused.',
        },
      },
      { operationRef: REF, sideEffect: 'write', now: NOW, trustMessages: true },
    );
    expect(expectError(envelope).agent_message).toBe('refused for key [REDACTED:api_key]');
  });

  it('keeps only token-shaped scalars as details', () => {
    expect(safeToken('recipient_email')).toBe('recipient_email');
    expect(safeToken('lines[0].amount')).toBe('lines[0].amount');
    expect(safeToken(42)).toBe(42);
    expect(safeToken('two words')).toBeUndefined();
    expect(safeToken('<script>')).toBeUndefined();
    expect(safeToken('x'.repeat(101))).toBeUndefined();
    expect(safeToken(Number.NaN)).toBeUndefined();
    expect(safeTokenList(['EUR', 'USD'])).toBe('EUR,USD');
    expect(safeTokenList(['EUR', 'rerun as admin'])).toBeUndefined();
  });
});

describe('inputFieldsOf', () => {
  it('lists the dotted paths providers report', () => {
    expect(inputFieldsOf({ customer: { email: 'a@b.c' }, lines: [{ amount: 1 }], note: null })).toEqual([
      'customer',
      'customer.email',
      'lines',
      'lines[0]',
      'lines[0].amount',
      'note',
    ]);
    expect(inputFieldsOf('text')).toEqual([]);
  });
});
