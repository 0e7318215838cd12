import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { callHttpTool } from '../../../packages/client/src/http-tool';

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
