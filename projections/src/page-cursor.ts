import { LedgerProblem } from '@recovery-ledger/core';

/**
 * Opaque list cursors: base64url of a small JSON tuple. Opaque so clients never build one, and the
 * keyset inside may change shape with a version bump without breaking anyone who only passes it on.
 */
const CURSOR_VERSION = 1;

export function encodeCursor(values: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify([CURSOR_VERSION, ...values]), 'utf8').toString('base64url');
}

/** The cursor's values, checked against the kinds the list expects; a bad cursor is a 400 naming it. */
export function decodeCursor(raw: unknown, kinds: readonly ('string' | 'number')[]): (string | number)[] | undefined {
  if (raw === undefined || raw === '') return undefined;
  const invalid = () =>
    new LedgerProblem('BAD_REQUEST', 'cursor is not a cursor this list returned', { field: 'cursor' });
  if (typeof raw !== 'string' || raw.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(raw)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed[0] !== CURSOR_VERSION || parsed.length !== kinds.length + 1) throw invalid();
  const values = parsed.slice(1) as unknown[];
  values.forEach((value, index) => {
    if (typeof value !== kinds[index] || (typeof value === 'number' && !Number.isSafeInteger(value))) throw invalid();
  });
  return values as (string | number)[];
}

/**
 * One page of a keyset list: the first `limit` items of what matched (read with at least one more
 * than the limit), and, when more followed, the cursor of the page's last item to spread into the answer.
 */
export function pageOf<T>(
  matched: readonly T[],
  limit: number,
  keysetOf: (last: T) => readonly (string | number)[],
): { page: T[]; next: { next_cursor?: string } } {
  const page = matched.slice(0, limit);
  const more = matched.length > limit && page.length > 0;
  return { page, next: more ? { next_cursor: encodeCursor(keysetOf(page[page.length - 1])) } : {} };
}
