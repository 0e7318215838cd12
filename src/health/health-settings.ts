import { integerSetting } from '../config/ledger-config';

export interface HealthSettings {
  /** Readiness fails while a projection's oldest unapplied event is older than this. */
  maxProjectionLagMs: number;
  /** A store that does not answer its health check within this is treated as unreachable. */
  checkTimeoutMs: number;
}

export const HEALTH_SETTINGS = Symbol('HEALTH_SETTINGS');

export function loadHealthSettings(env: NodeJS.ProcessEnv = process.env): HealthSettings {
  return {
    maxProjectionLagMs: integerSetting(env, 'LEDGER_READY_MAX_LAG_MS', 10_000, 0, 86_400_000),
    checkTimeoutMs: integerSetting(env, 'LEDGER_HEALTH_TIMEOUT_MS', 2_000, 1, 60_000),
  };
}
