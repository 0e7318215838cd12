/**
 * Enough of the Dockerfile grammar for the image tests (test/e2e/runtime-image-layout,
 * test/e2e/docker-build-stage): comments, line continuations, one stage per FROM, COPY's
 * `--from=`, ENV's `key=value` pairs, exec-form commands.
 */
export interface Instruction {
  keyword: string;
  args: string;
}

export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

export function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (current === '' && (line.trim().startsWith('#') || line.trim() === '')) continue;
    if (line.trim().startsWith('#')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push((current + line).trim());
    current = '';
  }
  const stages: Stage[] = [];
  for (const line of logical) {
    const [keyword, ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (keyword.toUpperCase() === 'FROM') {
      const [image, as, name] = rest;
      stages.push({ from: image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
      continue;
    }
    stages[stages.length - 1].instructions.push({ keyword: keyword.toUpperCase(), args });
  }
  return stages;
}

export interface Copy {
  from?: string;
  sources: string[];
  destination: string;
}

export function copiesOf(stage: Stage): Copy[] {
  return stage.instructions.filter((instruction) => instruction.keyword === 'COPY').map(copyOf);
}

export function copyOf(instruction: Instruction): Copy {
  const words = instruction.args.split(/\s+/);
  const flags = words.filter((word) => word.startsWith('--'));
  const paths = words.filter((word) => !word.startsWith('--'));
  const from = flags.find((flag) => flag.startsWith('--from='))?.slice('--from='.length);
  return { from, sources: paths.slice(0, -1), destination: paths[paths.length - 1] };
}

/** `ENV A=1 B=2` (the only form this Dockerfile uses; the legacy `ENV A 1` is refused). */
export function envOf(instruction: Instruction): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of instruction.args.split(/\s+/).filter(Boolean)) {
    const equals = pair.indexOf('=');
    if (equals <= 0) throw new Error(`ENV without key=value: ${instruction.args}`);
    env[pair.slice(0, equals)] = pair.slice(equals + 1).replace(/^"(.*)"$/, '$1');
  }
  return env;
}

/** The command of an exec-form instruction (`CMD ["node", ...]`), as its argument list. */
export function execForm(args: string): string[] {
  const json = args.slice(args.indexOf('['));
  const parsed: unknown = JSON.parse(json);
  if (!Array.isArray(parsed) || !parsed.every((word) => typeof word === 'string'))
    throw new Error(`not an exec form: ${args}`);
  return parsed as string[];
}
