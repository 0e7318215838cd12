import type { ApprovalRecordedData } from '../../src/domain/events';
import { APPROVAL_RECORDED_DATA_SCHEMA, type ApprovalRecordedFactData } from '../../src/facts/approval-recorded';

// Mutual assignability: the type derived from the schema is the hand-written one, field by field.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const sameType: Equal<ApprovalRecordedFactData, ApprovalRecordedData> = true;

describe('ApprovalRecorded fact definition', () => {
  it('derives the hand-written data type from its schema', () => {
    expect(sameType).toBe(true);
  });

  it('requires what the type requires', () => {
    expect([...APPROVAL_RECORDED_DATA_SCHEMA.required]).toEqual(['decision', 'approver']);
  });
});
