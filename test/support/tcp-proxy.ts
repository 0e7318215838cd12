/**
 * A TCP proxy in the test process, put between one service instance and its database to cut that
 * instance off while the others keep their connections: `cut()` resets every connection through it
 * (at both ends, as a link that goes down and a peer that answers RST) and closes the port, so a new
 * connection is refused; `restore()` opens the port again. Nothing is held back or delayed: while it
 * is not cut, bytes are passed on as they come. `silence()` is the other kind of cut, a link that
 * drops every packet: connections stay open and new ones are taken, but no byte is passed on either
 * way until `restore()`, when what was held goes on in order (as TCP retransmits after a partition).
 * Through a proxy the peers' kernels still answer each other's keep-alive probes, so a silence here
 * is noticed only by timeouts of the application's own, never by TCP keep-alives.
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
  /** Passes no byte on, either way, until `restore()`; connections stay open. */
  silence(): void;
  /** Listens again on the same port, and passes bytes on again. */
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
  let silent = false;
  let held: Array<() => void> = [];
  const server = createServer((inbound) => {
    opened++;
    const outbound = connect(target.port, target.host);
    for (const socket of [inbound, outbound]) {
      open.add(socket);
      // A reset is what a cut is for: the error is expected, and ends the pair.
      socket.on('error', () => undefined);
      socket.on('close', () => {
        open.delete(socket);
        // Through a silent link a close does not arrive either: it waits with the bytes.
        const end = () => {
          inbound.destroy();
          outbound.destroy();
        };
        if (silent) held.push(end);
        else end();
      });
    }
    // Bytes are passed on by hand rather than piped, so that a silence can hold them.
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk: Buffer) => {
        if (silent) held.push(() => to.write(chunk));
        else to.write(chunk);
      });
    forward(inbound, outbound);
    forward(outbound, inbound);
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
    silence: () => {
      silent = true;
    },
    restore: async () => {
      silent = false;
      const release = held;
      held = [];
      for (const write of release) write();
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
