/**
 * What the host's model reads about an upstream tool. A tool's title, description, schema
 * descriptions and annotation title are prose the upstream chose, read by the model as
 * instructions would be: an injection channel. Unless the configuration vouches for the server
 * (`trust_descriptions`), none of it passes: the tool keeps its name, the structure of its
 * schemas and its boolean hints, and gets the title and description the configuration gives
 * (docs/mcp-gateway.md, "What the model reads about a tool").
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ToolTextConfig } from './gateway-config';

/** The JSON Schema keywords that say what a valid value is; every other keyword is dropped. */
const STRUCTURE = new Set([
  '$schema',
  '$id',
  '$ref',
  '$anchor',
  'type',
  'enum',
  'const',
  'format',
  'nullable',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minContains',
  'maxContains',
  'required',
  'minProperties',
  'maxProperties',
  'dependentRequired',
]);
/** Keywords whose value is one schema. */
const ONE_SCHEMA = new Set([
  'items',
  'additionalItems',
  'additionalProperties',
  'unevaluatedItems',
  'unevaluatedProperties',
  'propertyNames',
  'contains',
  'not',
  'if',
  'then',
  'else',
]);
/** Keywords whose value is a list of schemas. */
const SCHEMA_LIST = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);
/** Keywords whose value maps names (the upstream's argument names, kept) to schemas. */
const SCHEMA_MAP = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The schema with only its structure: no description, title, examples, default or comment, at any depth. */
export function schemaStructure(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(schemaStructure); // draft-04 tuple `items`
  if (!isObject(schema)) return schema; // `true` / `false` schemas
  const kept: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (STRUCTURE.has(keyword)) kept[keyword] = value;
    else if (ONE_SCHEMA.has(keyword)) kept[keyword] = schemaStructure(value);
    else if (SCHEMA_LIST.has(keyword) && Array.isArray(value)) kept[keyword] = value.map(schemaStructure);
    else if (SCHEMA_MAP.has(keyword) && isObject(value)) {
      kept[keyword] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, schemaStructure(sub)]));
    }
  }
  return kept;
}

const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const;

/**
 * The tool as the host may see it. Trusted: as the upstream wrote it, with the configuration's
 * title and description in place of its own where given. Not trusted: the name, the schemas'
 * structure, the boolean hints, the execution mode, and only the configuration's words.
 */
export function hostTool(tool: Tool, trusted: boolean, text: ToolTextConfig | undefined): Tool {
  const title = text?.title ?? (trusted ? tool.title : undefined);
  const description = text?.description ?? (trusted ? tool.description : undefined);
  if (trusted) {
    const { title: _title, description: _description, ...rest } = tool;
    return { ...rest, ...(title ? { title } : {}), ...(description ? { description } : {}) };
  }
  const hints = Object.fromEntries(
    HINTS.filter((hint) => typeof tool.annotations?.[hint] === 'boolean').map((hint) => [
      hint,
      tool.annotations?.[hint],
    ]),
  );
  return {
    name: tool.name,
    ...(title ? { title } : {}),
    ...(description ? { description } : {}),
    inputSchema: schemaStructure(tool.inputSchema) as Tool['inputSchema'],
    ...(tool.outputSchema ? { outputSchema: schemaStructure(tool.outputSchema) as Tool['outputSchema'] } : {}),
    ...(Object.keys(hints).length > 0 ? { annotations: hints } : {}),
    ...(tool.execution ? { execution: tool.execution } : {}),
  };
}
