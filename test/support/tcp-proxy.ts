/**
 * A TCP proxy in the test process, put between one service instance and its database to cut that
 * instance off while the others keep their connections: `cut()` resets every connection through it
 * (at both ends, as a link that goes down and a peer that answers RST) and closes the port, so a new
 * connection is refused; `restore()` opens the port again. Nothing is held back or delayed: while it
 * is not cut, bytes are passed on as they come.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The loopback port the proxy listens on. */
  port: number;
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  /** Connections passed on since the start, and those open now. */
  connections(): { opened: number; open: number };
  /** Resets every open connection and closes the port until `restore()`. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let opened = 0;
  const server = createServer((inbound) => {
    opened++;
    const outbound = connect(target.port, target.host);
    for (const socket of [inbound, outbound]) {
      open.add(socket);
      // A reset is what a cut is for: the error is expected, and ends the pair.
      socket.on('error', () => undefined);
      socket.on('close', () => {
        open.delete(socket);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  const port = await listen(server, 0);
  let listening = true;
  return {
    port,
    through: (url) => {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    connections: () => ({ opened, open: open.size }),
    cut: async () => {
      if (!listening) return;
      listening = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of open) socket.resetAndDestroy();
      await closed;
    },
    restore: async () => {
      if (listening) return;
      await listen(server, port);
      listening = true;
    },
    close: async () => {
      for (const socket of open) socket.destroy();
      if (listening) await new Promise<void>((resolve) => server.close(() => resolve()));
      listening = false;
    },
  };
}
