import type { ToolError } from '@recovery-ledger/core/envelope';
import { escalate, uncertainOutcome, waitAndRetry, type NormalizeContext } from './envelope-builders';

/**
 * Whether the request can have left the process. docs/contract.md §2: "A timeout before a request leaves the
 * process is different from a timeout after the remote system may have accepted it."
 */
export type SendPhase = 'before_send' | 'after_send' | 'unknown';

export type NetworkFailureKind =
  'dns' | 'connect' | 'tls_certificate' | 'tls_handshake' | 'reset' | 'timeout' | 'aborted' | 'protocol' | 'other';

export interface NetworkErrorClassification {
  phase: SendPhase;
  kind: NetworkFailureKind;
  /** The decisive error code found on the error or its causes (`ECONNREFUSED`, `UND_ERR_SOCKET`). */
  code?: string;
}

// No connection was ever made, so no request byte can have reached a server.
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_NODATA', 'EAI_FAIL', 'EAI_ADDRFAMILY']);
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  // undici (Node 20's fetch) wraps these in `cause`:
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_PRX_TLS',
]);
// The TLS handshake comes before the request: a failed one means nothing was sent.
const TLS_CERTIFICATE_CODES = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'HOSTNAME_MISMATCH',
]);
const TLS_HANDSHAKE_CODES = new Set([
  'ERR_TLS_HANDSHAKE_TIMEOUT',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE',
  'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION',
  'ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_TLSV1_UNRECOGNIZED_NAME',
  'ERR_SSL_UNSUPPORTED_PROTOCOL',
  'ERR_SSL_NO_PROTOCOLS_AVAILABLE',
  'ERR_SSL_UNKNOWN_PROTOCOL',
  'EPROTO',
]);
// A connection existed: the request, or part of it, may have reached the server.
const AFTER_SEND_CODES: Record<string, NetworkFailureKind> = {
  ECONNRESET: 'reset', // includes node:http's "socket hang up"
  EPIPE: 'reset',
  ECONNABORTED: 'reset',
  ETIMEDOUT: 'timeout',
  ESOCKETTIMEDOUT: 'timeout',
  UND_ERR_SOCKET: 'reset',
  UND_ERR_CLOSED: 'reset',
  UND_ERR_DESTROYED: 'reset',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_ABORTED: 'aborted',
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: 'protocol',
  UND_ERR_REQ_CONTENT_LENGTH_MISMATCH: 'protocol',
  UND_ERR_HEADERS_OVERFLOW: 'protocol',
  UND_ERR_RES_EXCEEDED_MAX_SIZE: 'protocol',
  UND_ERR_INFO: 'protocol',
};

interface Signal {
  phase: SendPhase;
  kind: NetworkFailureKind;
  code?: string;
}

function signalOf(error: Record<string, unknown>): Signal | undefined {
  const code = typeof error.code === 'string' ? error.code : undefined;
  const syscall = typeof error.syscall === 'string' ? error.syscall : undefined;
  const name = typeof error.name === 'string' ? error.name : undefined;
  if (code) {
    if (DNS_CODES.has(code) || syscall === 'getaddrinfo') return { phase: 'before_send', kind: 'dns', code };
    // Node names the syscall: a failed `connect` never carried a request, whatever the code says.
    if (CONNECT_CODES.has(code) || syscall === 'connect') return { phase: 'before_send', kind: 'connect', code };
    if (TLS_CERTIFICATE_CODES.has(code)) return { phase: 'before_send', kind: 'tls_certificate', code };
    if (TLS_HANDSHAKE_CODES.has(code)) return { phase: 'before_send', kind: 'tls_handshake', code };
    const after = AFTER_SEND_CODES[code];
    if (after) return { phase: 'after_send', kind: after, code };
    // llhttp's parser errors: an answer came back, malformed, so the request had been sent.
    if (code.startsWith('HPE_')) return { phase: 'after_send', kind: 'protocol', code };
  }
  // An abort or a timeout from an AbortSignal says nothing about how far the request had got.
  if (name === 'AbortError') return { phase: 'unknown', kind: 'aborted', code: code ?? name };
  if (name === 'TimeoutError') return { phase: 'unknown', kind: 'timeout', code: code ?? name };
  if (code) return { phase: 'unknown', kind: 'other', code };
  return undefined;
}

/** The error, its `cause` chain and an AggregateError's members (happy-eyeballs connects). */
function collectSignals(error: unknown): Signal[] {
  const signals: Signal[] = [];
  const seen = new Set<unknown>();
  const visit = (node: unknown, depth: number): void => {
    if (node === null || typeof node !== 'object' || seen.has(node) || depth > 8) return;
    seen.add(node);
    const record = node as Record<string, unknown>;
    const signal = signalOf(record);
    if (signal) signals.push(signal);
    visit(record.cause, depth + 1);
    if (Array.isArray(record.errors)) for (const member of record.errors) visit(member, depth + 1);
  };
  visit(error, 0);
  return signals;
}

/**
 * Classifies a thrown network error by its codes only. Messages are never read: a tool adapter may
 * put upstream text in one, and prose must not decide that a write did not happen. "Before send" is
 * claimed only when every signal says so; one signal of a sent request, or of doubt, wins.
 */
export function classifyNetworkError(error: unknown): NetworkErrorClassification {
  const signals = collectSignals(error);
  const after = signals.find((signal) => signal.phase === 'after_send');
  if (after) return { phase: 'after_send', kind: after.kind, code: after.code };
  const doubt = signals.find((signal) => signal.phase === 'unknown');
  if (doubt) return { phase: 'unknown', kind: doubt.kind, code: doubt.code };
  const before = signals.find((signal) => signal.phase === 'before_send');
  if (before) return { phase: 'before_send', kind: before.kind, code: before.code };
  return { phase: 'unknown', kind: 'other' };
}

export interface NetworkErrorOptions extends NormalizeContext {
  /**
   * What the caller knows about the send, for errors that cannot tell (an AbortError). Pass
   * `before_send` only when the abort provably happened before the request was handed to the
   * socket; a thrown error with a decisive code wins over this hint when it says `after_send`.
   */
  phase?: SendPhase;
}

/**
 * A thrown network error to an envelope. Before the request can have left: nothing committed, and
 * a later attempt is safe (TLS certificate failures go to a person: waiting does not fix them).
 * After: for a write the outcome is unknown and must be verified by operation_ref; a read only
 * failed, and may be retried later.
 */
export function normalizeNetworkError(error: unknown, options: NetworkErrorOptions): ToolError {
  const classified = classifyNetworkError(error);
  let phase = classified.phase;
  if (phase === 'unknown' && options.phase !== undefined) phase = options.phase;

  if (phase === 'before_send') {
    if (classified.kind === 'tls_certificate') return escalate(options, 'TLS_FAILURE', 'dependency');
    const code =
      classified.kind === 'tls_handshake'
        ? 'TLS_FAILURE'
        : classified.kind === 'dns' || classified.kind === 'connect'
          ? 'NETWORK_UNREACHABLE'
          : 'REQUEST_NOT_SENT';
    return waitAndRetry(options, code, undefined);
  }
  return uncertainOutcome(options);
}
