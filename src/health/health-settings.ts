import { ConfigError } from '../config/ledger-config';

export interface HealthSettings {
  /** Readiness fails while a projection's oldest unapplied event is older than this. */
  maxProjectionLagMs: number;
  /** A store that does not answer its health check within this is treated as unreachable. */
  checkTimeoutMs: number;
}

export const HEALTH_SETTINGS = Symbol('HEALTH_SETTINGS');

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return value;
}

export function loadHealthSettings(env: NodeJS.ProcessEnv = process.env): HealthSettings {
  return {
    maxProjectionLagMs: integer(env, 'LEDGER_READY_MAX_LAG_MS', 10_000, 0, 86_400_000),
    checkTimeoutMs: integer(env, 'LEDGER_HEALTH_TIMEOUT_MS', 2_000, 1, 60_000),
  };
}
