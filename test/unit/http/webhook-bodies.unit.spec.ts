import { LedgerProblem } from '@recovery-ledger/core';
import { readDeliveryQuery, readNewSubscription, readRotation } from '../../../src/http/webhooks.reader';
import { NOTIFICATION_KINDS } from '../../../src/webhooks/notification-rules';

/** The 400 a read answers: its detail and field, as the problem+json body carries them. */
function refusal(read: () => unknown): { detail: string; field?: unknown } {
  try {
    read();
  } catch (error) {
    if (!(error instanceof LedgerProblem) || error.code !== 'BAD_REQUEST') throw error;
    return { detail: error.detail, ...(error.extras.field === undefined ? {} : { field: error.extras.field }) };
  }
  throw new Error('expected a 400');
}

const URL_RULE = 'url must be an http or https URL without credentials, at most 2048 characters';

describe('a new subscription, read against its schema', () => {
  it('takes a URL as the URL parser writes it, and the fields it names', () => {
    expect(readNewSubscription({ url: 'HTTPS://Example.com', kinds: [], premature_refusals: 1 })).toEqual({
      url: 'https://example.com/',
      kinds: [],
      premature_refusals: 1,
    });
  });

  it.each([
    ['a body that is no object', [], { detail: 'the body must be a JSON object' }],
    ['null', null, { detail: 'the body must be a JSON object' }],
    [
      'a field it does not know, before any other fault',
      { url: 'ftp://x', secret: 's' },
      { detail: 'secret is not a field of a subscription', field: 'secret' },
    ],
    ['no url', {}, { detail: URL_RULE, field: 'url' }],
    ['a url that is no string', { url: 7 }, { detail: URL_RULE, field: 'url' }],
    ['another scheme', { url: 'ftp://example.com' }, { detail: URL_RULE, field: 'url' }],
    ['credentials in the url', { url: 'https://user:pw@example.com' }, { detail: URL_RULE, field: 'url' }],
    [
      'a url over 2048 characters',
      { url: `https://example.com/${'a'.repeat(2048)}` },
      { detail: URL_RULE, field: 'url' },
    ],
    [
      'a kind that is no notification',
      { url: 'https://example.com', kinds: ['operation.cancelled', 'nope'] },
      { detail: `kinds must be a list of ${NOTIFICATION_KINDS.join(', ')}`, field: 'kinds' },
    ],
    [
      'kinds that are no list',
      { url: 'https://example.com', kinds: 'operation.cancelled' },
      { detail: `kinds must be a list of ${NOTIFICATION_KINDS.join(', ')}`, field: 'kinds' },
    ],
    [
      'a wait out of range',
      { url: 'https://example.com', unknown_after_ms: -1 },
      { detail: 'unknown_after_ms must be an integer from 0 to 2592000000', field: 'unknown_after_ms' },
    ],
    [
      'a count that is no integer',
      { url: 'https://example.com', premature_refusals: 1.5 },
      { detail: 'premature_refusals must be an integer from 1 to 1000', field: 'premature_refusals' },
    ],
    [
      'a count given as a string',
      { url: 'https://example.com', premature_refusals: '3' },
      { detail: 'premature_refusals must be an integer from 1 to 1000', field: 'premature_refusals' },
    ],
  ])('refuses %s, naming the field', (_case, body, expected) => {
    expect(refusal(() => readNewSubscription(body))).toEqual(expected);
  });
});

describe('a rotation, read against its schema', () => {
  it('has an optional body', () => {
    expect(readRotation(undefined)).toBeUndefined();
    expect(readRotation({ overlap_seconds: 60 })).toBe(60);
  });

  it.each([
    ['a body that is no object', 'soon', { detail: 'the body must be a JSON object' }],
    ['a field it does not know', { overlap: 1 }, { detail: 'overlap is not a field of a rotation', field: 'overlap' }],
    [
      'an overlap over a week',
      { overlap_seconds: 7 * 86_400 + 1 },
      { detail: 'overlap_seconds must be an integer from 0 to 604800', field: 'overlap_seconds' },
    ],
  ])('refuses %s', (_case, body, expected) => {
    expect(refusal(() => readRotation(body))).toEqual(expected);
  });
});

describe('the deliveries query', () => {
  it('defaults to 50 of any status, and refuses a status that is none', () => {
    expect(readDeliveryQuery(undefined, undefined)).toEqual({ limit: 50 });
    expect(readDeliveryQuery('failed', '5')).toEqual({ status: 'failed', limit: 5 });
    expect(refusal(() => readDeliveryQuery('lost', undefined))).toEqual({
      detail: 'status must be one of pending, delivered, failed',
      field: 'status',
    });
  });
});
