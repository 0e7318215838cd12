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
    ...publicBaseUrl(env),
  };
}

/**
 * LEDGER_PUBLIC_BASE_URL: the service's address as receivers reach it (`https://ledger.example.com`,
 * or with a path prefix behind a proxy): an http(s) URL with neither query nor fragment, kept
 * without its trailing slash so links are `<base>/v1/operations/…`.
 */
function publicBaseUrl(env: NodeJS.ProcessEnv): { publicBaseUrl?: string } {
  const raw = (env.LEDGER_PUBLIC_BASE_URL ?? '').trim();
  if (raw === '') return {};
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`LEDGER_PUBLIC_BASE_URL must be an http(s) URL, got "${raw}"`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || url.username || url.password)
    throw new ConfigError(
      `LEDGER_PUBLIC_BASE_URL must be an http(s) URL without query, fragment or credentials, got "${raw}"`,
    );
  return { publicBaseUrl: `${url.origin}${url.pathname}`.replace(/\/+$/, '') };
}

/** `1`/`true` or `0`/`false`; unset is off. */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${name} must be 1 or 0 (true or false), got "${env[name]}"`);
}
