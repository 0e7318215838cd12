/**
 * The DBOS row of the tool-step figure: a Fastify route that runs a DBOS workflow of one step
 * (the tool's answer, checkpointed in PostgreSQL) with the operation's ref as its workflow ID, so
 * that a retried request is the same workflow, and answers its result.
 *
 *   PORT=3100 DBOS_SYSTEM_DATABASE_URL=postgres://... node dist/bench/support/peers/dbos.server.js
 */
import Fastify from 'fastify';
import { loadPeer } from '../peers';

interface StepInput {
  operation_ref: string;
  tool: string;
  input_hash: string;
}
interface Dbos {
  setConfig(config: { name: string; systemDatabaseUrl: string; logLevel?: string; applicationVersion?: string }): void;
  launch(): Promise<void>;
  shutdown(): Promise<void>;
  registerWorkflow<A extends unknown[], R>(
    fn: (...args: A) => Promise<R>,
    config: { name: string },
  ): (...args: A) => Promise<R>;
  runStep<R>(fn: () => Promise<R>, config: { name: string }): Promise<R>;
  startWorkflow<A extends unknown[], R>(
    fn: (...args: A) => Promise<R>,
    params: { workflowID: string },
  ): (...args: A) => Promise<{ getResult(): Promise<R> }>;
}

async function main(): Promise<void> {
  const { DBOS } = loadPeer<{ DBOS: Dbos }>('@dbos-inc/dbos-sdk');
  DBOS.setConfig({
    name: 'tool-steps-bench',
    applicationVersion: '1',
    systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL ?? '',
    logLevel: 'warn',
  });
  const toolStep = DBOS.registerWorkflow(
    async (input: StepInput) => {
      const result = await DBOS.runStep(
        async () => ({ commit_state: 'committed', result: { id: `res_${input.operation_ref}` }, tool: input.tool }),
        {
          name: 'call',
        },
      );
      return { status: 'succeeded', ...result };
    },
    { name: 'toolStep' },
  );
  await DBOS.launch();

  const app = Fastify({ bodyLimit: 256 * 1024, logger: false });
  app.post('/steps/:ref', async (request) => {
    const input = request.body as StepInput;
    const handle = await DBOS.startWorkflow(toolStep, { workflowID: (request.params as { ref: string }).ref })(input);
    return handle.getResult();
  });
  await app.listen({ port: Number(process.env.PORT ?? 3100), host: '127.0.0.1' });
  const close = () =>
    void app
      .close()
      .then(() => DBOS.shutdown())
      .then(() => process.exit(0));
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.stdout.write('dbos route listening\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`dbos route failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
