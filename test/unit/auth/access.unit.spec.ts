import { ROLE_ACCESS } from '../../../src/auth/roles';

/** The role table of issue 6, written out: a change to src/auth/access.ts must change this too. */
describe('what each role may do', () => {
  it('runtime: read and submit; auditor: read; admin: read and the admin routes; nobody needs a key for public', () => {
    expect(ROLE_ACCESS).toEqual({
      runtime: ['read', 'write'],
      auditor: ['read'],
      admin: ['read', 'admin'],
    });
  });
});
