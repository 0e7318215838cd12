import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { callHttpTool } from '@recovery-ledger/client';

describe('callHttpTool and a caller signal', () => {
  let server: Server;
  let url: string;
  let requests = 0;

  beforeAll(async () => {
    server = createServer((_request, response) => {
      requests += 1;
      setTimeout(() => response.end('{"id":"inv_1"}'), 5_000).unref();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoices`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const options = { operationRef: 'run_1/step_1', sideEffect: 'write' as const };

  it('aborted before the call: the request never left, so nothing is committed', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = requests;
    const envelope = await callHttpTool({ url, body: { amount: 1 }, signal: controller.signal }, options);
    expect(requests).toBe(before);
    expect(envelope).toMatchObject({ ok: false, commit_state: 'not_committed', next_action: 'wait_and_retry' });
  });

  it('aborted while the request is out: the outcome of a write is unknown', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const envelope = await callHttpTool({ url, body: { amount: 1 }, signal: controller.signal }, options);
    expect(envelope).toMatchObject({ ok: false, commit_state: 'unknown', next_action: 'verify_operation' });
  });
});

/**
 * How close the window check sits to the write (docs/reliability.md "How close the check sits to
 * the write"): a write goes out on a connection of its own, and the window is checked again when
 * that connection is up, in the step that hands the request to the socket.
 */
describe('callHttpTool and the call window of a write', () => {
  let server: Server;
  let url: string;
  const seen: Array<{ socket: number; deadline: string | undefined }> = [];
  let sockets = 0;

  beforeAll(async () => {
    server = createServer((request, response) => {
      const socket = (request.socket as { id?: number } & typeof request.socket).id!;
      seen.push({ socket, deadline: request.headers['ledger-call-deadline'] as string | undefined });
      request.resume();
      request.on('end', () => response.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"inv_1"}'));
    });
    server.on('connection', (socket) => Object.assign(socket, { id: ++sockets }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoices`;
  });
  beforeEach(() => (seen.length = 0));
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const options = { operationRef: 'run_1/step_2', sideEffect: 'write' as const };
  const deadline = '2026-12-06T10:00:00.000Z';

  it('sends the call deadline to the provider as Ledger-Call-Deadline', async () => {
    const envelope = await callHttpTool(
      { url, body: { amount: 1 }, callWindow: { deadline, open: () => true } },
      options,
    );
    expect(envelope).toMatchObject({ ok: true });
    expect(seen).toEqual([expect.objectContaining({ deadline })]);
  });

  it('a window that closes after the call began but before its bytes left: nothing reaches the provider', async () => {
    // A pause between the tool's start and the write: the first check passes, the one at the socket does not.
    let checks = 0;
    const callWindow = { deadline, open: () => ++checks === 1 };
    const envelope = await callHttpTool({ url, body: { amount: 1 }, callWindow }, options);
    expect(seen).toEqual([]);
    expect(checks).toBeGreaterThanOrEqual(2);
    expect(envelope).toMatchObject({ ok: false, code: 'CALL_WINDOW_PASSED', commit_state: 'not_committed' });
  });

  it('every write has a connection of its own: none waits in a pool to write without a check', async () => {
    for (let call = 0; call < 3; call++) {
      expect(await callHttpTool({ url, body: { amount: call } }, options)).toMatchObject({ ok: true });
    }
    expect(new Set(seen.map((request) => request.socket)).size).toBe(3);
  });
});
