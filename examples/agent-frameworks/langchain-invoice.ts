/**
 * The LangChain v1 / LangGraph integration, runnable on loopback without a model provider: a
 * createAgent on LangChain's fake tool-calling model asks for the same invoice twice; the ledger
 * middleware creates it once and answers the model the envelope's words. Put your own chat model in
 * `model` for a real agent.
 *
 *   node dist/examples/agent-frameworks/langchain-invoice.js --ledger http://127.0.0.1:3000 \
 *     --provider http://127.0.0.1:4010 [--run run-1] [--key KEY]
 *
 * The provider is the example one (node dist/examples/invoice-provider/main.js); --key is a
 * runtime key of the ledger (none in local mode). Each line printed is one JSON object.
 */
import { MemorySaver } from '@langchain/langgraph';
import { createAgent, FakeToolCallingModel, tool } from 'langchain';
import { z } from 'zod';
import { ledgerAttempt, ledgerMiddleware } from '@recovery-ledger/agent-frameworks/langchain';
import { LedgerClient } from '@recovery-ledger/client';
import { exitOnHelp, flag, log } from '../example-cli';
import { invoiceTools } from '../invoice-tools';

const INVOICE = { customer_id: 'cus_example', amount_cents: 1200, currency: 'EUR' };

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledgerUrl = flag('ledger') ?? 'http://127.0.0.1:3000';
  const providerUrl = flag('provider') ?? 'http://127.0.0.1:4010';
  const runId = flag('run') ?? `langchain-example-${Date.now()}`;
  const key = flag('key');
  const ledger = new LedgerClient({ baseUrl: ledgerUrl, ...(key ? { apiKey: key } : {}) });
  const { createInvoice, lookup } = invoiceTools(providerUrl);
  // The tool is the provider call; the middleware runs it once per attempt the ledger grants.
  const createInvoiceTool = tool((input) => createInvoice(input, ledgerAttempt()), {
    name: 'create_invoice',
    description: 'Creates an invoice for a customer.',
    schema: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
  });
  const agent = createAgent({
    // Asks for the same invoice twice (as a confused model might), then answers.
    model: new FakeToolCallingModel({
      toolCalls: [
        [{ name: 'create_invoice', args: INVOICE, id: 'call_1', type: 'tool_call' }],
        [{ name: 'create_invoice', args: INVOICE, id: 'call_2', type: 'tool_call' }],
        [],
      ],
    }),
    tools: [createInvoiceTool],
    middleware: [
      ledgerMiddleware({
        create_invoice: {
          ledger,
          name: 'create_invoice',
          runId,
          policy: { max_attempts: 3, consistency_window_ms: 30_000 },
          lookup,
        },
      }),
    ],
    checkpointer: new MemorySaver(),
  });
  const state = await agent.invoke(
    { messages: [{ role: 'user', content: 'Invoice cus_example 12 EUR.' }] },
    { configurable: { thread_id: runId } },
  );
  for (const message of state.messages)
    if (message.getType() === 'tool') log({ event: 'tool_result', model_saw: message.content });
  log({ event: 'finished', messages: state.messages.length });
}

main().catch((error: unknown) => {
  log({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
  process.exit(1);
});
