/**
 * The field names of a tool's input, as the dotted paths providers report (`customer.email`,
 * `lines[0].amount`). A provider's answer may name the invalid field only if it is one of these:
 * a field name is upstream text too, and the one detail the model is asked to act on, so it is
 * checked against what the runtime actually sent rather than trusted because it looks like a name.
 */
export function inputFieldsOf(input: unknown, maxFields = 500): string[] {
  const fields: string[] = [];
  const walk = (node: unknown, at: string, depth: number): void => {
    if (fields.length >= maxFields || depth > 6 || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.slice(0, 50).forEach((item, index) => {
        const path = `${at}[${index}]`;
        fields.push(path);
        walk(item, path, depth + 1);
      });
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      const path = at ? `${at}.${key}` : key;
      fields.push(path);
      walk(value, path, depth + 1);
    }
  };
  walk(input, '', 0);
  return fields;
}
