import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { containsSecret, type DetectedSecret, type SecretDetector, type SecretKind } from '@recovery-ledger/core';

interface SecretlintMessage {
  ruleId: string;
  range: readonly [number, number] | number[];
}
type LintSource = (input: {
  source: { filePath: string; content: string; ext: string; contentType: 'text' };
  options: { config: { rules: unknown[] }; maskSecrets?: boolean };
}) => Promise<{ messages: SecretlintMessage[] }>;

interface Secretlint {
  lintSource: LintSource;
  config: { rules: unknown[] };
}

/**
 * secretlint is published as ES modules only. Node 20.19+ (and Jest, which compiles it) load it
 * with require; older Node 20 releases need a real dynamic import, which the CommonJS build would
 * otherwise rewrite into a require.
 */
async function loadSecretlint(): Promise<Secretlint> {
  let core: { lintSource: LintSource };
  let preset: { creator: unknown };
  let profiler: { secretLintProfiler: { setEnabled?(enabled: boolean): void; mark(marker: unknown): void } };
  try {
    // secretlint ships ES modules only: Node's require of ESM where it has it, import() below where not.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    core = require('@secretlint/core');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    preset = require('@secretlint/secretlint-rule-preset-recommend');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    profiler = require('@secretlint/profiler');
  } catch {
    const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<any>;
    core = await importModule('@secretlint/core');
    preset = await importModule('@secretlint/secretlint-rule-preset-recommend');
    profiler = await importModule('@secretlint/profiler');
  }
  // On by default, the profiler marks every rule of every lint in the process's performance
  // timeline and keeps every entry: in a long-running service, memory without bound (it reached
  // the timeline's million-entry warning within 66,000 submits) and time on every scan.
  // secretlint 12 (the last whose engines include Node 20) has no switch: its mark() is the one
  // entry point that records, so making it a no-op has the same effect.
  if (typeof profiler.secretLintProfiler.setEnabled === 'function') profiler.secretLintProfiler.setEnabled(false);
  else profiler.secretLintProfiler.mark = () => undefined;
  // Built once: the preset's rules are compiled when the config is, not on every scan.
  return {
    lintSource: core.lintSource,
    config: {
      rules: [
        {
          id: '@secretlint/secretlint-rule-preset-recommend',
          rule: preset.creator,
          // The comment filter honours `secretlint-disable` written in the scanned text: a caller
          // could switch detection off for everything after it in its own submit.
          rules: [{ id: '@secretlint/secretlint-rule-filter-comments', disabled: true }],
        },
      ],
    },
  };
}

/** Texts are joined into one source per scan; the separator is one no rule reads across as a secret. */
const SEPARATOR = '\n\n\n';

/**
 * The scanned text with every `secretlint-disable`/`-enable` directive made inert, character for
 * character (offsets still point into the caller's text): the comment filter would otherwise let a
 * caller switch detection off for what follows in its own submit, and disabling that filter in the
 * preset's configuration is not honoured by every secretlint release.
 */
const DIRECTIVE = /secretlint-(disable|enable)/gi;
export function withoutDirectives(text: string): string {
  return text.replace(DIRECTIVE, (directive) => directive.replace('-', '~'));
}

/** `@secretlint/secretlint-rule-slack` -> `detected_slack`. */
function kindOf(ruleId: string): SecretKind {
  const name = ruleId
    .replace(/^@secretlint\/secretlint-rule-/, '')
    .replace(/[^a-z0-9]+/gi, '_')
    .toLowerCase();
  return `detected_${name || 'secret'}`;
}

/**
 * What every rule of the preset needs in a text before it can report anything: a run of 16 or more
 * token characters (every key, token and webhook it knows is one), a scheme (`://`: credentials in
 * URLs and connection strings), a private key's header, or an AWS account id's label. A text with
 * none of these (most messages an agent or a person writes) is not linted at all; the synchronous
 * shapes and names of redaction.ts still see it.
 */
const MAY_HOLD_SECRET = /[A-Za-z0-9_+/=.-]{16,}|:\/\/|PRIVATE KEY|[Aa][Cc][Cc][Oo][Uu][Nn][Tt]/;

const keyOf = (text: string) => createHash('sha256').update(text).digest('base64');

/** Texts waiting for the next lint, each with the callers that need its findings. */
interface PendingLint {
  texts: Map<string, Array<{ resolve(found: readonly DetectedSecret[]): void; reject(error: unknown): void }>>;
}

/**
 * The asynchronous half of redaction: secretlint's recommended preset run over every string a submit
 * carries, with what it found per string cached by the string's hash (the same message, tool name or
 * run id recurs across facts). A lint costs about the same fixed time whatever its length (the preset
 * is set up again on each call), so the strings of every submit that asks within one turn of the event
 * loop are joined into one lint (under load, many submits share it). The domain's redaction then asks
 * the returned detector synchronously.
 */
export class SecretScanner {
  private secretlint: Promise<Secretlint> | undefined;
  private readonly cache = new LRUCache<string, readonly DetectedSecret[]>({ max: 20_000 });
  private next: PendingLint | undefined;

  /** Loads the rules ahead of the first submit, so its latency does not include that. */
  warmUp(): Promise<void> {
    return this.load().then(() => undefined);
  }

  async detectorFor(texts: Iterable<string>): Promise<SecretDetector> {
    const found = new Map<string, readonly DetectedSecret[]>();
    const waiting: Array<Promise<void>> = [];
    for (const text of texts) {
      if (found.has(text)) continue;
      found.set(text, []);
      if (!MAY_HOLD_SECRET.test(text)) continue;
      const cached = this.cache.get(keyOf(text));
      if (cached) found.set(text, cached);
      else waiting.push(this.lintSoon(text).then((secrets) => void found.set(text, secrets)));
    }
    await Promise.all(waiting);
    return (text) => found.get(text) ?? [];
  }

  /** The findings in `text`, from the lint that runs at the end of this turn of the event loop. */
  private lintSoon(text: string): Promise<readonly DetectedSecret[]> {
    if (!this.next) {
      const batch: PendingLint = { texts: new Map() };
      this.next = batch;
      setImmediate(() => {
        if (this.next === batch) this.next = undefined;
        void this.lint(batch);
      });
    }
    const batch = this.next;
    return new Promise((resolve, reject) => {
      const callers = batch.texts.get(text);
      if (callers) callers.push({ resolve, reject });
      else batch.texts.set(text, [{ resolve, reject }]);
    });
  }

  private async lint(batch: PendingLint): Promise<void> {
    const pending = [...batch.texts.keys()];
    try {
      const { lintSource, config } = await this.load();
      const starts: number[] = [];
      let offset = 0;
      for (const text of pending) {
        starts.push(offset);
        offset += text.length + SEPARATOR.length;
      }
      const result = await lintSource({
        source: {
          filePath: 'submit.txt',
          content: withoutDirectives(pending.join(SEPARATOR)),
          ext: '.txt',
          contentType: 'text',
        },
        options: { config },
      });
      const perText = pending.map<DetectedSecret[]>(() => []);
      for (const message of result.messages) {
        const [start, end] = message.range;
        // Each text the range touches gets its part of it (a range never spans texts in practice).
        pending.forEach((text, index) => {
          const from = Math.max(start, starts[index]);
          const to = Math.min(end, starts[index] + text.length);
          if (from < to)
            perText[index].push({ start: from - starts[index], end: to - starts[index], kind: kindOf(message.ruleId) });
        });
      }
      pending.forEach((text, index) => {
        this.cache.set(keyOf(text), perText[index]);
        for (const caller of batch.texts.get(text) ?? []) caller.resolve(perText[index]);
      });
    } catch (error) {
      for (const callers of batch.texts.values()) for (const caller of callers) caller.reject(error);
    }
  }

  private load(): Promise<Secretlint> {
    this.secretlint ??= loadSecretlint();
    return this.secretlint;
  }
}

/**
 * The one secret detector of the service (docs/security.md, "Secrets"): every free-form field, every
 * identifier, a plan's input, a webhook URL, a worker name, a request id and a tracestate are
 * judged by it, with redaction.ts's shapes and names. One instance, so the preset loads once and
 * what it found in a string serves every caller.
 */
export const secretScanner = new SecretScanner();

/** Whether the one detector (secretlint's preset, then redaction.ts's shapes and names) flags `text`. */
export async function holdsSecret(text: string): Promise<boolean> {
  return containsSecret(text, { detect: await secretScanner.detectorFor([text]) });
}

/** Every string of a JSON value, object keys included. */
export function* stringsOf(value: unknown): Generator<string> {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'string') yield node;
    else if (Array.isArray(node)) stack.push(...node);
    else if (node !== null && typeof node === 'object') {
      for (const [key, item] of Object.entries(node)) {
        yield key;
        stack.push(item);
      }
    }
  }
}
