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
