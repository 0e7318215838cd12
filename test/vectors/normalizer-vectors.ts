/** The normalizer vectors, computed the same way by the generator and by the unit test that checks the file. */
import type {
  normalizeHttpResponse as HttpNormalizer,
  normalizeMcpToolResult as McpNormalizer,
} from '@recovery-ledger/client';
import { NORMALIZER_NOW, type HttpCase, type McpCase } from './vector-inputs';

const REF = 'run_81/step_4';

export function normalizerVectors(
  httpCases: readonly HttpCase[],
  mcpCases: readonly McpCase[],
  http: typeof HttpNormalizer,
  mcp: typeof McpNormalizer,
) {
  const now = new Date(NORMALIZER_NOW);
  return {
    http: httpCases.map((input) => ({
      ...input,
      envelope: http(
        { status: input.status, headers: input.headers, body: input.body },
        {
          operationRef: REF,
          sideEffect: input.side_effect,
          now,
          ...(input.input_fields ? { inputFields: input.input_fields } : {}),
          ...(input.code_map ? { codeMap: input.code_map } : {}),
        },
      ),
    })),
    mcp: mcpCases.map((input) => ({
      ...input,
      envelope: mcp(input.result, {
        operationRef: REF,
        sideEffect: input.side_effect,
        now,
        allowedCodes: input.allowed_codes,
        ...(input.input_fields ? { inputFields: input.input_fields } : {}),
        ...(input.trust_messages ? { trustMessages: true } : {}),
      }),
    })),
  };
}
