/**
 * The shape limits every JSON body is held to before any validator, redactor or decider sees it.
 * They are checked by an iterative walk, so a body nested 100 000 levels deep (which fits easily
 * in the size limit) costs a loop, not a stack overflow in a recursive validator further on.
 */
export interface BodyLimits {
  /** Containers (objects and arrays) nested in each other; the body itself is level 1. */
  maxDepth: number;
  maxKeyLength: number;
  /**
   * Any string anywhere. Set above every named field's own limit (the largest is 1 000), so those
   * fields keep answering with their own code and field; this bounds what has no limit of its own
   * (a verification's free-form `result`).
   */
  maxStringLength: number;
}

export const DEFAULT_BODY_LIMITS: BodyLimits = {
  // A submit is 6 levels deep at most (body, events, event, data, envelope, safe_details); 32
  // leaves room for a verification result's own structure.
  maxDepth: 32,
  maxKeyLength: 256,
  maxStringLength: 64 * 1024,
};

/**
 * Keys through which a JSON body can reach an object's prototype once it is merged or copied
 * (`Object.assign`, spreads, class-transformer). `__proto__` and `constructor.prototype` are
 * already refused by Fastify's parser; these are refused anywhere, in any combination.
 */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export interface BodyViolation {
  /** Where, as the validators name fields (`events[0].data.constructor`), or `body`. */
  field: string;
  reason: string;
}

/** Field paths echo the client's own keys; a pathological key must not make the answer huge. */
const MAX_FIELD_LENGTH = 300;

function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

function named(field: string): string {
  return field === '' || field.length > MAX_FIELD_LENGTH ? 'body' : field;
}

/** The first limit the value breaks, in document order; undefined when it keeps them all. */
export function inspectBody(value: unknown, limits: BodyLimits = DEFAULT_BODY_LIMITS): BodyViolation | undefined {
  const stack: Array<{ node: unknown; path: string; depth: number }> = [{ node: value, path: '', depth: 1 }];
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop() as { node: unknown; path: string; depth: number };
    if (typeof node === 'string') {
      if (node.length > limits.maxStringLength) {
        return { field: named(path), reason: `is longer than ${limits.maxStringLength} characters` };
      }
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    if (depth > limits.maxDepth) {
      return { field: 'body', reason: `is nested deeper than ${limits.maxDepth} levels` };
    }
    const children: Array<{ node: unknown; path: string; depth: number }> = [];
    if (Array.isArray(node)) {
      node.forEach((item, index) => children.push({ node: item, path: childPath(path, index), depth: depth + 1 }));
    } else {
      for (const key of Object.keys(node)) {
        if (FORBIDDEN_KEYS.has(key)) return { field: named(childPath(path, key)), reason: 'is a forbidden key' };
        if (key.length > limits.maxKeyLength) {
          return { field: named(path), reason: `has a key longer than ${limits.maxKeyLength} characters` };
        }
        children.push({ node: (node as Record<string, unknown>)[key], path: childPath(path, key), depth: depth + 1 });
      }
    }
    // Reversed onto the stack, so the first key is inspected first and the answer names the
    // violation a reader would find first.
    for (let index = children.length - 1; index >= 0; index--) stack.push(children[index]);
  }
  return undefined;
}

/**
 * A number in the raw JSON text that `JSON.parse` cannot keep as sent: beyond ±(2^53 − 1) it is
 * rounded (12345678901234567890 becomes 12345678901234567000) or becomes Infinity (1e400, which
 * then stores as null), and a non-zero literal below the smallest double becomes 0. The parsed
 * value cannot tell, so the text is read once more: a small scanner that follows strings, keys and
 * indices (the text is already known to be valid JSON) and names the field of the first such number.
 */
export function findUnsafeNumber(text: string): { field: string; reason: string } | undefined {
  // Every such literal has 16 or more digits in a row, or an exponent: most bodies skip the scan.
  if (!/\d{16}|\d[eE][+-]?\d/.test(text)) return undefined;
  type Frame = { kind: 'object'; key: string } | { kind: 'array'; index: number };
  const stack: Frame[] = [];
  let expectingKey = false;
  const pathOf = () =>
    stack.reduce(
      (path, frame) =>
        frame.kind === 'array' ? `${path}[${frame.index}]` : path === '' ? frame.key : `${path}.${frame.key}`,
      '',
    );
  for (let at = 0; at < text.length; at++) {
    const char = text[at];
    if (char === '"') {
      let end = at + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (expectingKey) {
        (stack[stack.length - 1] as { key: string }).key = JSON.parse(text.slice(at, end + 1));
        expectingKey = false;
      }
      at = end;
    } else if (char === '{') {
      stack.push({ kind: 'object', key: '' });
      expectingKey = true;
    } else if (char === '[') {
      stack.push({ kind: 'array', index: 0 });
    } else if (char === '}' || char === ']') {
      stack.pop();
    } else if (char === ',') {
      const top = stack[stack.length - 1];
      if (top?.kind === 'array') top.index += 1;
      else expectingKey = true;
    } else if (char === '-' || (char >= '0' && char <= '9')) {
      const match = /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(at, at + 400)) as RegExpExecArray;
      const literal = match[0];
      const value = Number(literal);
      const field = named(pathOf());
      if (!Number.isFinite(value) || Math.abs(value) > Number.MAX_SAFE_INTEGER) {
        return { field, reason: 'is a number outside the safe integer range (±9007199254740991); send it as a string' };
      }
      if (value === 0 && /[1-9]/.test(literal.replace(/[eE].*$/, ''))) {
        return { field, reason: 'is a number too small to represent; send it as a string' };
      }
      at += literal.length - 1;
    }
  }
  return undefined;
}
