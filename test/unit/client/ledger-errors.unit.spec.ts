/**
 * An application that imports the client's ES-module build and an integration that requires its
 * CommonJS build hold two copies of the client's error classes; each copy must recognise the
 * other's errors by their kind (packages/client/src/ledger-errors.ts), or a 404 the loop expects
 * (an operation not planned yet) escapes it as a throw.
 */
import * as first from '../../../packages/client/src/ledger-errors';

function anotherCopy(): typeof first {
  let copy: typeof first | undefined;
  jest.isolateModules(() => {
    copy = jest.requireActual<typeof first>('../../../packages/client/src/ledger-errors');
  });
  if (!copy || copy.LedgerError === first.LedgerError) throw new Error('expected a second copy of the module');
  return copy;
}

describe('LedgerError across copies of the client', () => {
  const other = anotherCopy();
  const notFound = other.ledgerErrorFromAnswer(404, {
    code: 'OPERATION_NOT_FOUND',
    detail: 'the operation has no events',
  });
  const refusal = other.ledgerErrorFromAnswer(409, { code: 'VERIFICATION_PREMATURE', detail: 'too early' });

  it('is recognised by its kind, whichever copy made it', () => {
    expect(notFound instanceof first.LedgerNotFound).toBe(true);
    expect(notFound instanceof first.LedgerError).toBe(true);
    expect(refusal instanceof first.LedgerRefusal).toBe(true);
    expect(first.isLedgerRefusal(refusal, 'VERIFICATION_PREMATURE')).toBe(true);
  });

  it('is not taken for another kind, nor is a plain error taken for one', () => {
    expect(notFound instanceof first.LedgerRefusal).toBe(false);
    expect(refusal instanceof first.LedgerNotFound).toBe(false);
    expect(new Error('OPERATION_NOT_FOUND') instanceof first.LedgerError).toBe(false);
    expect(
      Object.assign(new Error('x'), { code: 'OPERATION_NOT_FOUND', status: 404 }) instanceof first.LedgerNotFound,
    ).toBe(false);
  });
});
