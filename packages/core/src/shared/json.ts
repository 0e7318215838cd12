export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

const isPlainRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * Whether a value is JSON as it is stored: checked, never copied, so what is hashed and stored is
 * the value itself. `undefined` members are allowed: every serialisation drops them
 * (src/shared/canonical-json.ts), so they are never stored.
 */
export function isJsonValue(value: unknown): value is JsonValue {
  return value !== undefined && isJsonMember(value);
}

function isJsonMember(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return true;
    case 'object':
      return Array.isArray(value) ? value.every(isJsonMember) : Object.values(value).every(isJsonMember);
    default:
      return false;
  }
}

export function isJsonObject(value: unknown): value is JsonObject {
  return isPlainRecord(value) && isJsonValue(value);
}
