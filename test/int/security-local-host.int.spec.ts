/**
 * DNS rebinding against local mode (docs/security.md, "Local mode"), over real HTTP against the
 * built service: a page whose name was rebound to 127.0.0.1 reaches the port, but its requests say
 * its own name in `Host`. Without keys, only loopback names and addresses are answered; anything
 * else gets 421 MISDIRECTED_REQUEST and nothing is read or stored. With keys, Host is not restricted.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { randomUUID } from 'node:crypto';
import { fact, opPath } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request with the Host header as given (fetch does not let a caller set it). */
function send(
  port: number,
  method: string,
  path: string,
  host: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        setHost: false,
        headers: { host, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** HTTP/1.0 without any Host header, on a raw socket. */
function sendWithoutHost(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.0\r\n\r\n`));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

const REF = 'run_host/step_1';
/** What the plan stored: the fact and the transition the ledger derived from it. */
const PLANNED = ['StepPlanned', 'TransitionRecorded'];
const plan = () =>
  JSON.stringify({
    events: [
      fact('StepPlanned', { run_id: 'run_host', tool: 'host_tool', side_effect: 'write', input_hash: 'sha256:host' }),
    ],
  });

describe('local mode answers loopback Host values only', () => {
  let ledger: LedgerProcess;

  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
    expect((await send(ledger.port, 'POST', `${opPath(REF)}/events`, `127.0.0.1:${ledger.port}`, plan())).status).toBe(
      200,
    );
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test.each([
    (port: number) => `127.0.0.1:${port}`,
    (port: number) => `localhost:${port}`,
    () => 'localhost',
    () => 'LocalHost.',
    (port: number) => `console.localhost:${port}`,
    () => '127.4.5.6',
    (port: number) => `[::1]:${port}`,
    () => '[::1]',
  ])('a loopback Host (%#) reads the log', async (host) => {
    const answer = await send(ledger.port, 'GET', `${opPath(REF)}/events`, host(ledger.port));
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).events.map((event: { type: string }) => event.type)).toEqual(PLANNED);
  });

  test.each([
    'evil.example',
    'evil.example:3000',
    'rebind.attacker.test:8080',
    '127.0.0.1.attacker.test',
    'localhost.attacker.test',
    'localhostx',
    '10.0.0.7',
    '0.0.0.0',
    '127.0.0.256',
    '[::ffff:127.0.0.1]',
    '[::2]',
    '',
    '127.0.0.1:99999',
    '127.0.0.1:abc',
  ])('Host %p gets 421 MISDIRECTED_REQUEST: no read, no write, no approval', async (host) => {
    const read = await send(ledger.port, 'GET', `${opPath(REF)}/events`, host);
    expect(read.status).toBe(421);
    expect(read.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(read.text)).toMatchObject({ status: 421, code: 'MISDIRECTED_REQUEST' });
    expect(read.text).not.toContain('host_tool');

    const approve = JSON.stringify({
      events: [fact('ApprovalRecorded', { decision: 'granted', approver: 'page', reason: 'rebinding' })],
    });
    const written = await send(ledger.port, 'POST', `${opPath(REF)}/events`, host, approve);
    expect(written.status).toBe(421);
    expect(JSON.parse(written.text).code).toBe('MISDIRECTED_REQUEST');

    // Public routes too: the page must not even learn that a ledger listens here.
    expect((await send(ledger.port, 'GET', '/health/live', host)).status).toBe(421);
  });

  test('a request without any Host is refused too', async () => {
    const raw = await sendWithoutHost(ledger.port, `${opPath(REF)}/events`);
    expect(raw).toMatch(/^HTTP\/1\.[01] 421/);
    expect(raw).not.toContain('host_tool');
  });

  test('nothing a refused request sent was stored', async () => {
    const events = await send(ledger.port, 'GET', `${opPath(REF)}/events`, `127.0.0.1:${ledger.port}`);
    expect(JSON.parse(events.text).events.map((event: { type: string }) => event.type)).toEqual(PLANNED);
  });

  test('a cross-site form post with a loopback Host is still refused (only JSON is taken)', async () => {
    const types = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'];
    const answers = [];
    for (const type of types) {
      const answer = await send(ledger.port, 'POST', `${opPath(REF)}/events`, `127.0.0.1:${ledger.port}`, plan(), {
        'content-type': type,
        origin: 'https://evil.example',
      });
      answers.push([type, answer.status, JSON.parse(answer.text).code]);
    }
    expect(answers).toEqual(types.map((type) => [type, 415, 'UNSUPPORTED_MEDIA_TYPE']));
  });
});

describe('with keys configured, Host is not restricted', () => {
  const KEY = `host-runtime-${randomUUID()}`;
  let ledger: LedgerProcess;

  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${KEY}:runtime:acme`, LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' },
    });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test('a proxy may forward any name: the key, not the name, decides', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    expect(
      (await send(ledger.port, 'POST', `${opPath(REF)}/events`, 'ledger.internal.example', plan(), auth)).status,
    ).toBe(200);
    expect(
      (await send(ledger.port, 'GET', `${opPath(REF)}/events`, 'ledger.internal.example:443', undefined, auth)).status,
    ).toBe(200);
    // Without a key the answer is the usual 401, not a 421.
    expect((await send(ledger.port, 'GET', `${opPath(REF)}/events`, 'evil.example')).status).toBe(401);
  });
});
