/**
 * Starts the built example invoice provider (`node dist/examples/invoice-provider/main.js --port 0`)
 * as a process of its own, for tests whose client is another process or another language.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const PROVIDER_MAIN = resolve(__dirname, '../../dist/examples/invoice-provider/main.js');

export interface ProviderProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** `args`: more of main.ts's flags, e.g. `--no-idempotency`. */
export async function startProviderProcess(timeoutMs = 15_000, args: string[] = []): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [PROVIDER_MAIN, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  let output = '';
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`the provider did not start in time:\n${output}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk;
      const match = /listening on (http:\/\/[0-9.]+:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk) => (output += chunk));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the provider exited with ${code}:\n${output}`));
    });
  });
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
