/**
 * A graceful stop (SIGTERM, app.close()) under load: a request the server took before it stopped
 * listening is answered as any other, never 500. The body of the request below is held back until
 * the server refuses new connections, so it reaches the handler while the application is closing.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';

jest.setTimeout(60_000);

/** Whether a new TCP connection is still accepted on the port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('a submit in flight when the service stops', () => {
  let ledger: InProcessLedger;

  beforeAll(async () => {
    ledger = await startLedgerInProcess();
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('is answered (not 500) when its body arrives after the server stopped listening', async () => {
    const body = JSON.stringify({
      events: [
        {
          event_id: randomUUID(),
          type: 'StepPlanned',
          data: { run_id: 'run_stop', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in-1' },
        },
      ],
    });
    const half = Math.floor(body.length / 2);
    let sent!: ReturnType<typeof request>;
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      sent = request(
        {
          host: '127.0.0.1',
          port: ledger.port,
          method: 'POST',
          path: `/v1/operations/${encodeURIComponent('run_stop/step_1')}/events`,
          headers: {
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
            'idempotency-key': randomUUID(),
            connection: 'close',
          },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
        },
      );
      sent.once('error', reject);
    });
    // The server has the request (its headers are read) before it begins to close.
    const received = new Promise((resolve) => ledger.app.getHttpServer().once('request', resolve));
    sent.write(body.slice(0, half));
    await received;
    const closing = ledger.stop();
    // Every module's first shutdown phase has run once the port refuses connections.
    while (await accepts(ledger.port)) await new Promise((resolve) => setImmediate(resolve));
    sent.end(body.slice(half));
    const { status, text } = await answer;
    await closing;
    expect({ status, text: status === 200 ? '' : text }).toEqual({ status: 200, text: '' });
  });
});
