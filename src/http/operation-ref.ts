import { LedgerProblem } from '@recovery-ledger/core';

/**
 * The grammar of an operation_ref, after it arrives percent-decoded (`run_81%2Fstep_4` ->
 * `run_81/step_4`) and is brought to Unicode NFC (so `é` sent composed or decomposed is one
 * operation): 1 to 200 characters, each printable ASCII or a letter, mark or digit of any script,
 * no leading or trailing space. Refused: control and format characters (bidi overrides such as
 * U+202E, zero-width spaces and joiners, U+FEFF), other spaces, and non-ASCII punctuation and
 * symbols (U+2215 DIVISION SLASH passing for `/`), each a way to make two refs look alike or to
 * make text in the page read in another order.
 */
const OPERATION_REF_PATTERN = /^[\x20-\x7e\p{L}\p{M}\p{N}]{1,200}$/u;
export const OPERATION_REF_RULE =
  'operation_ref must be 1 to 200 characters, printable ASCII or letters, marks and digits (no control, bidi, invisible or look-alike characters, no leading or trailing space)';

export function checkOperationRef(ref: unknown): string {
  const normalised = typeof ref === 'string' ? ref.normalize('NFC') : undefined;
  if (normalised === undefined || !OPERATION_REF_PATTERN.test(normalised) || normalised.trim() !== normalised) {
    throw new LedgerProblem('BAD_REQUEST', OPERATION_REF_RULE, { field: 'operation_ref' });
  }
  return normalised;
}

export function optionalInteger(raw: unknown, field: string, min: number, max: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'string' && /^-?\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new LedgerProblem('BAD_REQUEST', `${field} must be an integer from ${min} to ${max}`, { field });
  }
  return value;
}
