import { ConfigError, loadConfig, POSTGRES_QUERY_TIMEOUT_MS } from '../../../src/config/ledger-config';

/** LEDGER_POSTGRES_QUERY_TIMEOUT_MS (docs/postgres.md, "Faults"): read, bounded, a bad value stops the start. */
describe('LEDGER_POSTGRES_QUERY_TIMEOUT_MS', () => {
  const postgres = { LEDGER_STORE: 'postgres', DATABASE_URL: 'postgres://ledger@localhost:5432/ledger' };

  it('is 15 s when unset or empty', () => {
    expect(POSTGRES_QUERY_TIMEOUT_MS).toBe(15_000);
    expect(loadConfig(postgres).postgresQueryTimeoutMs).toBe(15_000);
    expect(loadConfig({ ...postgres, LEDGER_POSTGRES_QUERY_TIMEOUT_MS: '' }).postgresQueryTimeoutMs).toBe(15_000);
  });

  it.each(['1000', '4000', '600000'])('takes %s', (raw) => {
    expect(loadConfig({ ...postgres, LEDGER_POSTGRES_QUERY_TIMEOUT_MS: raw }).postgresQueryTimeoutMs).toBe(Number(raw));
  });

  it.each(['0', '999', '600001', '-5000', '1.5', '15s', 'off'])('refuses %p with a line that names it', (raw) => {
    expect(() => loadConfig({ ...postgres, LEDGER_POSTGRES_QUERY_TIMEOUT_MS: raw })).toThrow(
      new ConfigError(`LEDGER_POSTGRES_QUERY_TIMEOUT_MS must be an integer from 1000 to 600000, got "${raw}"`),
    );
  });

  it('is refused whatever the store, so a typo is caught before a switch to PostgreSQL', () => {
    expect(() => loadConfig({ LEDGER_POSTGRES_QUERY_TIMEOUT_MS: '0' })).toThrow(ConfigError);
  });
});
