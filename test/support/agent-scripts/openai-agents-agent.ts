/**
 * An OpenAI Agents SDK agent as its own process, for the SIGKILL test:
 *   node --require ./test/chaos/swc-register.cjs test/support/agent-scripts/openai-agents-agent.ts \
 *     --run RUN --state FILE
 * (AGENT_LEDGER_URL and AGENT_PROVIDER_URL from runAgentScript). Its write tool needs approval.
 * Without FILE, it runs from the start and, interrupted for the approval, saves the RunState to FILE
 * and exits. With FILE, it is the SDK's own resume: RunState.fromString, state.approve, run(state).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, RunState, run, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { ledgeredAgentsTool, type LedgeredAgentsToolOutput } from '@recovery-ledger/agent-frameworks/openai-agents';
import { agentWorldFromEnv, emit } from '../agent-framework-harness';
import { scriptedAgentsModel } from '../openai-agents-scripted-model';

export const AGENTS_INPUT = { customer_id: 'cus_agentskill', amount_cents: 4300, currency: 'EUR' };

async function main(): Promise<void> {
  setTracingDisabled(true);
  const arg = (name: string) => process.argv[process.argv.indexOf(name) + 1];
  const runId = arg('--run');
  const stateFile = arg('--state');
  // A call window long enough for the provider's slow answer: the process dies inside it.
  const world = agentWorldFromEnv({ callTimeoutMs: 10_000 });
  const createInvoice = ledgeredAgentsTool({
    ...world.writeTool(),
    policy: { ...world.policy, approval_required: true },
    ledger: world.runtime,
    name: 'create_invoice',
    description: 'Creates an invoice.',
    runId,
    parameters: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
    log: (line) => emit(line),
  });
  const resume = existsSync(stateFile);
  // Resumed, the run is past the model's tool call: the model's next turn is its last.
  const turns = [{ toolCalls: [{ tool: 'create_invoice', input: AGENTS_INPUT }] }, { text: 'done' }];
  const agent = new Agent({
    name: 'billing',
    model: scriptedAgentsModel(resume ? turns.slice(1) : turns),
    tools: [createInvoice],
  });
  emit({ event: 'started', run: runId, resume });
  let result;
  if (resume) {
    const state = await RunState.fromString(agent, readFileSync(stateFile, 'utf8'));
    for (const interruption of state.getInterruptions()) state.approve(interruption);
    result = await run(agent, state);
  } else {
    result = await run(agent, 'Invoice cus_agentskill 43 EUR.');
  }
  if (result.interruptions.length > 0) {
    writeFileSync(stateFile, result.state.toString());
    emit({ event: 'interrupted', tools: result.interruptions.map((item) => item.name) });
    return;
  }
  const outputs = result.newItems
    .filter((item) => item.type === 'tool_call_output_item')
    .map((item) => (item as { customData?: { ledger?: LedgeredAgentsToolOutput } }).customData?.ledger);
  emit({ event: 'finished', outputs, final: result.finalOutput });
}

// Imported by the test for AGENTS_INPUT: run only as a script.
if (require.main === module) {
  main().catch((error: unknown) => {
    emit({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}
