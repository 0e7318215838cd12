/**
 * The Restate row of the tool-step figure: a service deployment on the Restate Node SDK
 * (bench/.peers) whose one handler records one tool step as one journaled `ctx.run`. The Restate
 * server calls it; the caller reaches it through the server's ingress with an `idempotency-key`.
 *
 *   PORT=9080 node dist/bench/support/peers/restate.service.js
 */
import { createServer } from 'node:http2';
import { loadPeer } from '../peers';

interface StepInput {
  operation_ref: string;
  tool: string;
  input_hash: string;
}
interface RestateContext {
  run<T>(name: string, action: () => Promise<T> | T): Promise<T>;
}
interface RestateEndpoint {
  bind(service: unknown): RestateEndpoint;
  http2Handler(): Parameters<typeof createServer>[0];
}
interface RestateSdk {
  service(definition: {
    name: string;
    handlers: Record<string, (ctx: RestateContext, input: StepInput) => Promise<unknown>>;
  }): unknown;
  endpoint(): RestateEndpoint;
}

/**
 * SDK 1.17.2 declares Node >= 20 but calls Promise.withResolvers (Node 22); on Node 20 every
 * invocation fails with a TypeError. The standard method, defined where it is missing.
 */
function providePromiseWithResolvers(): void {
  const promise = Promise as unknown as { withResolvers?: unknown };
  if (typeof promise.withResolvers === 'function') return;
  promise.withResolvers = function withResolvers<T>() {
    let resolve!: (value: T | PromiseLike<T>) => void;
    let reject!: (reason?: unknown) => void;
    const created = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise: created, resolve, reject };
  };
}

async function main(): Promise<void> {
  providePromiseWithResolvers();
  const restate = loadPeer<RestateSdk>('@restatedev/restate-sdk');
  const toolStep = restate.service({
    name: 'toolStep',
    handlers: {
      // The tool's answer, recorded once in the journal: a retry with the same idempotency key is
      // answered from the server without calling the handler again.
      record: async (ctx, input) => {
        const result = await ctx.run('call', () => ({
          commit_state: 'committed',
          result: { id: `res_${input.operation_ref}` },
          tool: input.tool,
        }));
        return { status: 'succeeded', ...result };
      },
    },
  });
  const server = createServer(restate.endpoint().bind(toolStep).http2Handler());
  await new Promise<void>((resolve) => server.listen(Number(process.env.PORT ?? 9080), '127.0.0.1', resolve));
  const close = () => server.close(() => process.exit(0));
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.stdout.write('restate service listening\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`restate service failed: ${String(error)}\n`);
  process.exit(1);
});
