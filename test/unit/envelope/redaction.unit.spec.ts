import { passesLuhn, redactDeep, redactText } from '../../../src/domain/envelope/redaction';
import { SECRET_CORPUS } from '../../support/secret-corpus';


describe('redaction', () => {
  it.each(SECRET_CORPUS)('redacts a %s', (_name, text, secret) => {
    const { text: redacted, kinds } = redactText(text);
    expect(redacted).not.toContain(secret);
    expect(kinds.length).toBeGreaterThan(0);
    expect(redacted).toMatch(/\[REDACTED:[a-z_]+\]/);
  });

  it('leaves ordinary text and numbers alone', () => {
    for (const text of ['invoice inv_123 for 1234 EUR', 'order 1234567890123 shipped', 'run_81/step_4', 'retry after 30 seconds']) {
      expect(redactText(text)).toEqual({ text, kinds: [] });
    }
  });

  it('checks card numbers by Luhn', () => {
    expect(passesLuhn('4111111111111111')).toBe(true);
    expect(passesLuhn('4111111111111112')).toBe(false);
  });

  it('walks nested values and keys, recording each path', () => {
    const { value, redactions } = redactDeep({ a: ['ok', 'Bearer abcdefghijklmnopqr'], b: { 'sk_live_abcdefghijkl': 1 } });
    expect(JSON.stringify(value)).not.toMatch(/abcdefghijklmnopqr|sk_live_abcdefghijkl/);
    expect(redactions.map((r) => r.path)).toEqual(['a[1]', 'b.<key>']);
  });
});
