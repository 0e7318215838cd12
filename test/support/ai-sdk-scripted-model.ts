/**
 * The AI SDK's own test model (MockLanguageModelV4 from `ai/test`), scripted: each generate call
 * answers the next step (tool calls, or a final text), and every prompt it was given is kept, so a
 * test reads exactly what the model saw.
 */
import { MockLanguageModelV4 } from 'ai/test';

export type ScriptedStep = { toolCalls: Array<{ tool: string; input: unknown }> } | { text: string };

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

export function scriptedModel(steps: ScriptedStep[]): MockLanguageModelV4 {
  let next = 0;
  let callIds = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const step = steps[Math.min(next++, steps.length - 1)];
      if ('text' in step) {
        return {
          content: [{ type: 'text', text: step.text }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      }
      return {
        content: step.toolCalls.map((call) => ({
          type: 'tool-call' as const,
          // A fresh id per call, as a real model gives: the operation_ref must not depend on it.
          toolCallId: `call_${++callIds}_${Math.random().toString(36).slice(2, 8)}`,
          toolName: call.tool,
          input: JSON.stringify(call.input),
        })),
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    },
  });
}

/** Every text the model was given in its prompts (tool results included), for "what it saw" checks. */
export function promptsSeen(model: MockLanguageModelV4): string {
  return JSON.stringify(model.doGenerateCalls.map((call) => call.prompt));
}
