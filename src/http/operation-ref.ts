import { LedgerError } from '../errors/ledger-error';

/** An operation_ref arrives percent-decoded (`run_81%2Fstep_4` -> `run_81/step_4`). */
const OPERATION_REF_PATTERN = /^[^\u0000-\u001f\u007f]{1,200}$/u;

export function checkOperationRef(ref: unknown): string {
  if (typeof ref !== 'string' || !OPERATION_REF_PATTERN.test(ref) || ref.trim().length === 0) {
    throw new LedgerError('BAD_REQUEST', 'operation_ref must be 1 to 200 printable characters', { field: 'operation_ref' });
  }
  return ref;
}

export function optionalInteger(raw: unknown, field: string, min: number, max: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'string' && /^-?\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new LedgerError('BAD_REQUEST', `${field} must be an integer from ${min} to ${max}`, { field });
  }
  return value;
}
