import { ConfigError, integerSetting } from '../config/ledger-config';
import { DEFAULT_WEBHOOK_SETTINGS, type WebhookSettings } from './webhook.service';

/** Webhook delivery settings from the environment (README, "Webhooks"). */
export function loadWebhookSettings(env: NodeJS.ProcessEnv): WebhookSettings {
  return {
    retryBaseMs: integerSetting(
      env,
      'LEDGER_WEBHOOK_RETRY_BASE_MS',
      DEFAULT_WEBHOOK_SETTINGS.retryBaseMs,
      10,
      3_600_000,
    ),
    retryMaxMs: integerSetting(env, 'LEDGER_WEBHOOK_RETRY_MAX_MS', DEFAULT_WEBHOOK_SETTINGS.retryMaxMs, 10, 86_400_000),
    maxAttempts: integerSetting(env, 'LEDGER_WEBHOOK_MAX_ATTEMPTS', DEFAULT_WEBHOOK_SETTINGS.maxAttempts, 1, 10_000),
    timeoutMs: integerSetting(env, 'LEDGER_WEBHOOK_TIMEOUT_MS', DEFAULT_WEBHOOK_SETTINGS.timeoutMs, 100, 120_000),
    pollMs: DEFAULT_WEBHOOK_SETTINGS.pollMs,
    allowPrivate: flag(env, 'LEDGER_WEBHOOK_ALLOW_PRIVATE'),
  };
}

/** `1`/`true` or `0`/`false`; unset is off. */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${name} must be 1 or 0 (true or false), got "${env[name]}"`);
}
