import { APPROVAL_RECORDED_DATA_SCHEMA } from '../../src/facts/approval-recorded';
import type { FromSchema } from '../../src/facts/from-schema';

// Checked by the type checker (npm test's typecheck): a false here does not compile.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

const SAMPLE = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    count: { type: 'integer' },
    kind: { enum: ['granted', 'denied'] },
    flags: { type: 'array', items: { type: 'boolean' } },
  },
  required: ['name', 'kind'],
} as const;
const derivesTheSample: Equal<
  FromSchema<typeof SAMPLE>,
  { name: string; kind: 'granted' | 'denied'; count?: number; flags?: boolean[] }
> = true;

describe('a fact defined once, as a schema literal', () => {
  it('gives its TypeScript type: required keys required, the others optional, enums as unions', () => {
    expect(derivesTheSample).toBe(true);
    expect(SAMPLE.required).toEqual(['name', 'kind']);
  });

  it('ApprovalRecorded requires what a person must say: the decision and who decided', () => {
    expect([...APPROVAL_RECORDED_DATA_SCHEMA.required]).toEqual(['decision', 'approver']);
  });
});
