/**
 * The TypeScript type a JSON Schema literal (`as const`) describes, for the subset the facts use:
 * object, string (with enum), integer/number, boolean, array. Type-level only, so the core keeps no
 * runtime dependency and its published .d.ts needs none.
 */
export type FromSchema<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly type: 'string' }
    ? string
    : S extends { readonly type: 'integer' | 'number' }
      ? number
      : S extends { readonly type: 'boolean' }
        ? boolean
        : S extends { readonly type: 'array'; readonly items: infer I }
          ? FromSchema<I>[]
          : S extends { readonly type: 'object'; readonly properties: infer P }
            ? ObjectOf<P, S extends { readonly required: readonly (infer R)[] } ? R : never>
            : unknown;

type ObjectOf<P, R> = Flatten<
  { -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } & {
    -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]>;
  }
>;

type Flatten<T> = { [K in keyof T]: T[K] };
