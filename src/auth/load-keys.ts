import { readFileSync } from 'node:fs';
import type { LedgerConfig } from '../config/ledger-config';

/** LEDGER_API_KEYS, plus one entry per line of LEDGER_API_KEYS_FILE (blank lines and # comments skipped). */
export function loadApiKeyEntries(config: LedgerConfig): string[] {
  const fromFile = config.apiKeysFile
    ? readFileSync(config.apiKeysFile, 'utf8')
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line.length > 0 && !line.startsWith('#'))
    : [];
  return [...config.apiKeys, ...fromFile];
}
