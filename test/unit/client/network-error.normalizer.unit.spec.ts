import { request as httpRequest, createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { classifyNetworkError, type NetworkErrorOptions, normalizeNetworkError } from '@recovery-ledger/client';
import { expectError, expectValid, NOW, REF, shape } from './support/envelope-assertions';

const write: NetworkErrorOptions = { operationRef: REF, sideEffect: 'write', now: NOW };
const read: NetworkErrorOptions = { operationRef: REF, sideEffect: 'read', now: NOW };

/** An error shaped as Node's own (`code`, `syscall`), as undici puts it in `cause`. */
function nodeError(code: string, syscall?: string): Error {
  return Object.assign(new Error(`${syscall ?? 'op'} ${code}`), { code, ...(syscall ? { syscall } : {}) });
}
const fetchFailed = (cause: unknown) => Object.assign(new TypeError('fetch failed'), { cause });

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('classifyNetworkError (codes only, causes followed)', () => {
  it.each([
    ['ENOTFOUND', 'getaddrinfo', 'dns'],
    ['EAI_AGAIN', 'getaddrinfo', 'dns'],
    ['ECONNREFUSED', 'connect', 'connect'],
    ['EHOSTUNREACH', 'connect', 'connect'],
    ['ETIMEDOUT', 'connect', 'connect'],
    ['UND_ERR_CONNECT_TIMEOUT', undefined, 'connect'],
    ['CERT_HAS_EXPIRED', undefined, 'tls_certificate'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', undefined, 'tls_certificate'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', undefined, 'tls_handshake'],
  ])('%s (%s) happens before the request can have left', (code, syscall, kind) => {
    expect(classifyNetworkError(fetchFailed(nodeError(code, syscall)))).toEqual({ phase: 'before_send', kind, code });
  });

  it.each([
    ['ECONNRESET', 'reset'],
    ['EPIPE', 'reset'],
    ['ETIMEDOUT', 'timeout'],
    ['UND_ERR_SOCKET', 'reset'],
    ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
    ['UND_ERR_BODY_TIMEOUT', 'timeout'],
    ['UND_ERR_CLOSED', 'reset'],
    ['HPE_INVALID_CONSTANT', 'protocol'],
  ])('%s happens after the request may have left', (code, kind) => {
    expect(classifyNetworkError(fetchFailed(nodeError(code)))).toEqual({ phase: 'after_send', kind, code });
  });

  it('follows an AggregateError of connection attempts (happy eyeballs)', () => {
    const aggregate = Object.assign(
      new AggregateError([nodeError('ECONNREFUSED', 'connect'), nodeError('ENETUNREACH', 'connect')]),
      {
        code: undefined,
      },
    );
    expect(classifyNetworkError(fetchFailed(aggregate)).phase).toBe('before_send');
  });

  it('lets one sign of a sent request outweigh any sign of a refused connection', () => {
    const mixed = Object.assign(new Error('x'), {
      cause: nodeError('ECONNREFUSED', 'connect'),
      errors: [nodeError('ECONNRESET')],
    });
    expect(classifyNetworkError(mixed).phase).toBe('after_send');
  });

  it('cannot tell for aborts, timeouts, unknown codes and plain errors', () => {
    expect(classifyNetworkError(new DOMException('aborted', 'AbortError')).phase).toBe('unknown');
    expect(classifyNetworkError(new DOMException('timed out', 'TimeoutError')).phase).toBe('unknown');
    expect(classifyNetworkError(nodeError('EWHATEVER')).phase).toBe('unknown');
    expect(classifyNetworkError(new Error('getaddrinfo ENOTFOUND example.com')).phase).toBe('unknown');
    expect(classifyNetworkError('a string').phase).toBe('unknown');
  });

  it('survives a cause cycle', () => {
    const a: any = new Error('a');
    const b: any = new Error('b');
    a.cause = b;
    b.cause = a;
    expect(classifyNetworkError(a).phase).toBe('unknown');
  });
});

describe('normalizeNetworkError', () => {
  it('before send -> not_committed, wait_and_retry at now + the default delay', () => {
    const envelope = normalizeNetworkError(fetchFailed(nodeError('ENOTFOUND', 'getaddrinfo')), write);
    expect(shape(envelope)).toEqual({
      ok: false,
      code: 'NETWORK_UNREACHABLE',
      category: 'dependency',
      commit_state: 'not_committed',
      directive: 'after_delay',
      next_action: 'wait_and_retry',
    });
    expect(expectError(envelope).retry.not_before).toBe(new Date(NOW.getTime() + 1000).toISOString());
    expectValid(envelope, 'write');
  });

  it('a certificate failure is not fixed by waiting: escalate, nothing committed', () => {
    const envelope = normalizeNetworkError(fetchFailed(nodeError('DEPTH_ZERO_SELF_SIGNED_CERT')), write);
    expect(shape(envelope)).toMatchObject({
      code: 'TLS_FAILURE',
      commit_state: 'not_committed',
      next_action: 'escalate',
    });
    expectValid(envelope, 'write');
  });

  it('after send on a write -> unknown, never, verify_operation (docs/contract.md §4: write socket timeout)', () => {
    const envelope = normalizeNetworkError(fetchFailed(nodeError('UND_ERR_SOCKET')), write);
    expect(shape(envelope)).toEqual({
      ok: false,
      code: 'OUTCOME_UNKNOWN',
      category: 'dependency',
      commit_state: 'unknown',
      directive: 'never',
      next_action: 'verify_operation',
    });
    expect(expectError(envelope).retry.max_attempts_remaining).toBe(0);
    expectValid(envelope, 'write');
  });

  it('after send on a read -> not_committed, wait_and_retry (a read commits nothing)', () => {
    const envelope = normalizeNetworkError(fetchFailed(nodeError('ECONNRESET')), read);
    expect(shape(envelope)).toMatchObject({
      code: 'REQUEST_INTERRUPTED',
      commit_state: 'not_committed',
      next_action: 'wait_and_retry',
    });
    expectValid(envelope, 'read');
  });

  it('an AbortError after send is unknown for a write; the caller can vouch for an abort before send', () => {
    const abort = new DOMException('This operation was aborted', 'AbortError');
    expect(shape(normalizeNetworkError(abort, write))).toMatchObject({
      commit_state: 'unknown',
      next_action: 'verify_operation',
    });
    const before = normalizeNetworkError(abort, { ...write, phase: 'before_send' });
    expect(shape(before)).toMatchObject({
      code: 'REQUEST_NOT_SENT',
      commit_state: 'not_committed',
      next_action: 'wait_and_retry',
    });
    expectValid(before, 'write');
  });

  it('does not let a hint override a code that says the request was sent', () => {
    const envelope = normalizeNetworkError(fetchFailed(nodeError('ECONNRESET')), { ...write, phase: 'before_send' });
    expect(shape(envelope)).toMatchObject({ commit_state: 'unknown' });
  });

  it('an error it cannot classify is unknown for a write', () => {
    expect(shape(normalizeNetworkError(new Error('boom'), write))).toMatchObject({ commit_state: 'unknown' });
    expect(shape(normalizeNetworkError(undefined, write))).toMatchObject({ commit_state: 'unknown' });
  });
});

describe('normalizeNetworkError on real failures of Node 20 fetch over loopback', () => {
  let server: Server;
  let base: string;
  let closedPort: number;

  beforeAll(async () => {
    server = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url === '/destroy') request.socket.destroy();
        else if (request.url === '/hang') return;
        else if (request.url === '/partial') {
          response.writeHead(200, { 'content-length': '100' });
          response.write('{"id":');
          setTimeout(() => request.socket.destroy(), 20);
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const probe = createNetServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    closedPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a refused connection: not_committed', async () => {
    const error = await caught(fetch(`http://127.0.0.1:${closedPort}/invoices`, { method: 'POST', body: '{}' }));
    expect(classifyNetworkError(error)).toMatchObject({ phase: 'before_send', code: 'ECONNREFUSED' });
    expect(shape(normalizeNetworkError(error, write))).toMatchObject({ commit_state: 'not_committed' });
  });

  it('a TLS handshake against a plain socket: not_committed', async () => {
    const error = await caught(fetch(`${base.replace('http:', 'https:')}/invoices`, { method: 'POST', body: '{}' }));
    expect(classifyNetworkError(error)).toMatchObject({ phase: 'before_send', kind: 'tls_handshake' });
  });

  it('the socket destroyed after the request arrived: unknown for a write', async () => {
    const error = await caught(fetch(`${base}/destroy`, { method: 'POST', body: '{}' }));
    expect(classifyNetworkError(error)).toMatchObject({ phase: 'after_send', code: 'UND_ERR_SOCKET' });
    expect(shape(normalizeNetworkError(error, write))).toMatchObject({
      commit_state: 'unknown',
      next_action: 'verify_operation',
    });
  });

  it('the body cut off after the status line: unknown for a write', async () => {
    const error = await caught(
      fetch(`${base}/partial`, { method: 'POST', body: '{}' }).then((response) => response.text()),
    );
    expect(classifyNetworkError(error).phase).toBe('after_send');
  });

  it('no answer within the response timeout: unknown for a write', async () => {
    const error = await caught(fetch(`${base}/hang`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(100) }));
    expect(classifyNetworkError(error)).toMatchObject({ phase: 'unknown', kind: 'timeout' });
    expect(shape(normalizeNetworkError(error, write))).toMatchObject({ commit_state: 'unknown' });
  });

  it("node:http's socket hang up: unknown for a write", async () => {
    const error = await caught(
      new Promise((resolve, reject) => {
        const outgoing = httpRequest(`${base}/destroy`, { method: 'POST' }, resolve);
        outgoing.on('error', reject);
        outgoing.end('{}');
      }),
    );
    expect(classifyNetworkError(error)).toMatchObject({ phase: 'after_send', code: 'ECONNRESET' });
  });
});
