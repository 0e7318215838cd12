/**
 * A `Model` for the OpenAI Agents SDK scripted by the test (the SDK ships no test model): each
 * getResponse answers the next step (function calls, or a final message), and every input it was
 * given is kept, so a test reads exactly what the model saw.
 */
import { Usage, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';

export type ScriptedTurn = { toolCalls: Array<{ tool: string; input: unknown }> } | { text: string };

export interface ScriptedAgentsModel extends Model {
  requests: ModelRequest[];
}

export function scriptedAgentsModel(turns: ScriptedTurn[]): ScriptedAgentsModel {
  let next = 0;
  let callIds = 0;
  const requests: ModelRequest[] = [];
  return {
    requests,
    getResponse: async (request: ModelRequest): Promise<ModelResponse> => {
      requests.push(request);
      const turn = turns[Math.min(next++, turns.length - 1)];
      if ('text' in turn) {
        return {
          usage: new Usage(),
          output: [
            {
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: turn.text }],
            },
          ],
        };
      }
      return {
        usage: new Usage(),
        output: turn.toolCalls.map((call) => ({
          type: 'function_call' as const,
          // A fresh id per call, as a real model gives: the operation_ref must not depend on it.
          callId: `call_${++callIds}_${Math.random().toString(36).slice(2, 8)}`,
          name: call.tool,
          arguments: JSON.stringify(call.input),
          status: 'completed' as const,
        })),
      };
    },
    // eslint-disable-next-line require-yield
    getStreamedResponse: async function* () {
      throw new Error('the scripted model answers getResponse only');
    },
  };
}

/** Every input the model was given (tool outputs included), for "what it saw" checks. */
export function inputsSeen(model: ScriptedAgentsModel): string {
  return JSON.stringify(model.requests.map((request) => request.input));
}
