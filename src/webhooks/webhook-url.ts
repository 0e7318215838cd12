import { containsSecret, isSecretKeyName, type SecretDetector } from '@recovery-ledger/core';
import { isPrivateHost } from './webhook-address';

/**
 * Query parameter names that carry a credential in webhook URLs besides the names redaction already
 * treats as secret (`token`, `password`, `secret`, `api_key`, `…_token`): `key=`, `sig=` (Azure SAS),
 * `X-Amz-Signature`, `jwt=`, `hmac=`. Compared lower-case, without separators.
 */
const CREDENTIAL_NAME = /^(key|sig|jwt|hmac|pass|bearer|session)$|(key|signature)$/;

export function isCredentialParameter(name: string): boolean {
  return isSecretKeyName(name) || CREDENTIAL_NAME.test(name.toLowerCase().replace(/[^a-z0-9]/g, ''));
}

/**
 * Why a subscription's URL is refused, or undefined (docs/webhooks.md, "Where a receiver may be"). A
 * URL is stored and listed back to admins, and sent to the log of every proxy on the way: a
 * credential in its query or fragment (by its name, or by what the secret scanner and redaction
 * flag in it) would be kept in plain text, so the receiver must authenticate by the signature
 * instead. A loopback, link-local or private address is refused unless allowed.
 */
export function urlRefusal(url: URL, options: { allowPrivate: boolean; detect?: SecretDetector }): string | undefined {
  const named = [...url.searchParams.keys()].find(isCredentialParameter);
  if (named !== undefined) {
    return `url must not carry a credential: its query parameter "${named}" names one; authenticate the ledger by the Recovery-Ledger-Signature header instead`;
  }
  for (const [part, text] of [
    ['query', url.search],
    ['fragment', url.hash],
  ] as const) {
    const pieces = [text, ...(part === 'query' ? [...url.searchParams.values()] : [])].filter((piece) => piece !== '');
    if (pieces.some((piece) => containsSecret(piece, options.detect ? { detect: options.detect } : {}))) {
      return `url must not carry a credential: its ${part} holds what looks like one; authenticate the ledger by the Recovery-Ledger-Signature header instead`;
    }
  }
  if (!options.allowPrivate && isPrivateHost(url.hostname)) {
    return `url must not point at a loopback, link-local or private address (${url.hostname}) unless LEDGER_WEBHOOK_ALLOW_PRIVATE=1 is set`;
  }
  return undefined;
}

/** The texts of a URL the secret scanner is asked about. */
export function scannedParts(url: URL): string[] {
  return [url.search, url.hash, ...url.searchParams.values()].filter((piece) => piece !== '');
}
