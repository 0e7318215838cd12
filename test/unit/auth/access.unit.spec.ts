import { mayRecord, ROLE_ACCESS } from '../../../src/auth/roles';

/** The role table, written out: a change to src/auth/roles.ts must change this too. */
describe('what each role may do', () => {
  it('runtime: read, submit and the work feed; approver and operator: read and submit; auditor: read; admin: read, the admin routes and its metrics; metrics: the scrape only', () => {
    expect(ROLE_ACCESS).toEqual({
      runtime: ['read', 'write', 'work'],
      approver: ['read', 'write'],
      operator: ['read', 'write'],
      auditor: ['read'],
      admin: ['read', 'admin', 'metrics'],
      metrics: ['metrics'],
    });
  });

  it('only an approver records an approval, unless self-approval is on or the service runs in local mode', () => {
    const off = { selfApproval: false, localMode: false };
    expect(mayRecord('approver', 'ApprovalRecorded', off)).toBe(true);
    expect(mayRecord('runtime', 'ApprovalRecorded', off)).toBe(false);
    expect(mayRecord('approver', 'AttemptDispatched', off)).toBe(false);
    expect(mayRecord('approver', 'StepPlanned', off)).toBe(false);
    expect(mayRecord('runtime', 'AttemptDispatched', off)).toBe(true);
    expect(mayRecord('admin', 'ApprovalRecorded', off)).toBe(false);
    expect(mayRecord('runtime', 'ApprovalRecorded', { selfApproval: true, localMode: false })).toBe(true);
    expect(mayRecord('auditor', 'ApprovalRecorded', { selfApproval: true, localMode: false })).toBe(false);
    expect(mayRecord('admin', 'ApprovalRecorded', { selfApproval: false, localMode: true })).toBe(true);
  });

  it('only an operator records operator facts, and an operator records nothing else (local mode excepted)', () => {
    const off = { selfApproval: true, localMode: false };
    for (const fact of ['OutcomeVerifiedManually', 'StepCancelled', 'StepReopened', 'EscalationAcknowledged']) {
      expect(mayRecord('operator', fact, off)).toBe(true);
      for (const role of ['runtime', 'approver', 'auditor', 'admin', 'metrics'] as const)
        expect(mayRecord(role, fact, off)).toBe(false);
      expect(mayRecord('runtime', fact, { selfApproval: false, localMode: true })).toBe(true);
    }
    for (const fact of [
      'StepPlanned',
      'AttemptDispatched',
      'EnvelopeRecorded',
      'VerificationRecorded',
      'ApprovalRecorded',
    ]) {
      expect(mayRecord('operator', fact, off)).toBe(false);
    }
  });
});
