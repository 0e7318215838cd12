/**
 * Every way of damaging the log that this suite knows (test/support/log-tampering.ts), each on its
 * own copy of a real events file: `recovery-ledger verify` reports it (never a stack trace, never
 * stopping at the first fault), and the service started on the damaged file reports it on
 * readiness, answers reads of the damaged operation with HISTORY_INTEGRITY_FAILED, and refuses to
 * append on top of it (docs/reliability.md, "A log whose every loss is detectable").
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openSeeder, runCli, seedIncident, tempDataDir } from '../support/cli-harness';
import { startLedger } from '../support/ledger-process';
import { rewriteEverything, TAMPER_CASES, type TamperCase } from '../support/log-tampering';

const ANCHOR_KEY = 'k'.repeat(16) + randomUUID().replace(/-/g, '');
let seeded: string;
let seededWithKey: string;

async function seed(label: string, env: Record<string, string>): Promise<string> {
  const dir = tempDataDir(label);
  const seeder = await openSeeder(dir, { anchorKey: env.LEDGER_ANCHOR_KEY });
  await seedIncident(seeder);
  await seeder.close();
  return dir;
}

function tampered(source: string, apply: (db: Database.Database) => void): string {
  const dir = tempDataDir('tampered');
  cpSync(source, dir, { recursive: true });
  const db = new Database(join(dir, 'events.sqlite'));
  try {
    apply(db);
  } finally {
    db.close();
  }
  return dir;
}

const eventCount = (dir: string) => {
  const db = new Database(join(dir, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

beforeAll(async () => {
  seeded = await seed('integrity', {});
  seededWithKey = await seed('integrity-key', { LEDGER_ANCHOR_KEY: ANCHOR_KEY });
});

afterAll(() => {
  rmSync(seeded, { recursive: true, force: true });
  rmSync(seededWithKey, { recursive: true, force: true });
});

describe('verify on a log damaged behind the ledger', () => {
  it('passes on the untouched log, with and without an anchor key', () => {
    expect(runCli(['verify', '--data-dir', seeded]).status).toBe(0);
    expect(runCli(['verify', '--data-dir', seededWithKey], { LEDGER_ANCHOR_KEY: ANCHOR_KEY }).status).toBe(0);
  });

  it.each(TAMPER_CASES.map((tamper) => [tamper.name, tamper] as const))('detects %s', (_name, tamper: TamperCase) => {
    const env: Record<string, string> = tamper.needsAnchorKey ? { LEDGER_ANCHOR_KEY: ANCHOR_KEY } : {};
    const dir = tampered(tamper.needsAnchorKey ? seededWithKey : seeded, tamper.apply);
    try {
      const run = runCli(['verify', '--data-dir', dir, '--json'], env);
      expect(run.stderr).not.toMatch(/\n\s+at /);
      expect(run.status).toBe(1);
      const report = JSON.parse(run.stdout) as { ok: boolean; findings: Array<{ kind: string; stream?: string }> };
      expect(report.ok).toBe(false);
      for (const kind of tamper.expect) expect(report.findings.map((finding) => finding.kind)).toContain(kind);
      const text = runCli(['verify', '--data-dir', dir], env);
      expect(text.status).toBe(1);
      expect(text.stdout).toMatch(/^BROKEN /m);
      expect(text.stderr).toMatch(/^recovery-ledger: /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports every broken stream, not only the first', () => {
    const dir = tampered(seeded, (db) => {
      db.prepare("UPDATE events SET data = json_set(data, '$.input_hash', 'x') WHERE revision = 0").run();
    });
    try {
      const report = JSON.parse(runCli(['verify', '--data-dir', dir, '--json']).stdout) as { broken_streams: string[] };
      expect(report.broken_streams).toEqual([
        'op-default:run_81/step_4',
        'op-default:run_81/step_5',
        'op-default:run_82/step_1',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a whole log rewritten with its anchors is caught by an earlier checkpoint (and only so, without a key)', () => {
    const checkpoint = join(seeded, '..', `checkpoint-${randomUUID()}.json`);
    expect(runCli(['verify', '--data-dir', seeded, '--checkpoint-out', checkpoint]).status).toBe(0);
    const dir = tampered(seeded, rewriteEverything);
    try {
      // Said plainly in docs/reliability.md: without a key or a checkpoint this is undetectable.
      expect(runCli(['verify', '--data-dir', dir]).status).toBe(0);
      const since = runCli(['verify', '--data-dir', dir, '--since', checkpoint, '--json']);
      expect(since.status).toBe(1);
      expect(JSON.parse(since.stdout).findings.map((finding: { kind: string }) => finding.kind)).toContain(
        'checkpoint_mismatch',
      );
      // The untouched log has only grown since its own checkpoint.
      expect(runCli(['verify', '--data-dir', seeded, '--since', checkpoint]).status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(checkpoint, { force: true });
    }
  });
});

describe('the service started on a damaged log', () => {
  it.each(TAMPER_CASES.map((tamper) => [tamper.name, tamper] as const))(
    'after %s: not ready, and refuses to read or append the damaged history',
    async (_name, tamper: TamperCase) => {
      const env: Record<string, string> = tamper.needsAnchorKey ? { LEDGER_ANCHOR_KEY: ANCHOR_KEY } : {};
      const dir = tampered(tamper.needsAnchorKey ? seededWithKey : seeded, tamper.apply);
      const ledger = await startLedger({ dataDir: dir, env });
      try {
        let ready: Response | undefined;
        for (let polls = 0; polls < 200; polls++) {
          ready = await fetch(`${ledger.baseUrl}/health/ready`);
          const body = (await ready.clone().json()) as { details?: { integrity?: { state?: string } } };
          if (['broken', 'unverifiable'].includes(body.details?.integrity?.state ?? '')) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(ready?.status).toBe(503);
        expect(((await ready?.json()) as { details: { integrity: { state: string } } }).details.integrity.state).toBe(
          'broken',
        );

        const path = `${ledger.baseUrl}/v1/operations/${encodeURIComponent(tamper.ref)}`;
        const read = await fetch(path);
        expect(read.status).toBe(500);
        expect(((await read.json()) as { code: string }).code).toBe('HISTORY_INTEGRITY_FAILED');

        const before = eventCount(dir);
        const submit = await fetch(`${path}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            events: [
              { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 3, input_hash: 'sha256:9c1f' } },
            ],
          }),
        });
        const problem = (await submit.json()) as { code: string; detail: string };
        expect(submit.status).toBe(500);
        expect(problem.code).toBe('HISTORY_INTEGRITY_FAILED');
        expect(problem.detail).not.toMatch(/\n\s+at /);
        expect(eventCount(dir)).toBe(before);
      } finally {
        await ledger.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

describe('an export checked offline against the heads and anchor in its footer', () => {
  function exported(): { file: string; lines: Array<Record<string, unknown>> } {
    const file = join(seeded, '..', `export-${randomUUID()}.ndjson`);
    expect(runCli(['export', '--data-dir', seeded, '--out', file]).status).toBe(0);
    return {
      file,
      lines: readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line)),
    };
  }

  /** Drops events from the file and fixes the footer's counts, as someone hiding the cut would. */
  function without(
    lines: Array<Record<string, unknown>>,
    drop: (event: Record<string, unknown>, index: number) => boolean,
  ): string {
    const events = lines.slice(1, -1).filter((event, index) => !drop(event, index));
    const footer = {
      ...lines[lines.length - 1],
      events: events.length,
      streams: new Set(events.map((event) => event.stream)).size,
    };
    return [lines[0], ...events, footer].map((line) => JSON.stringify(line)).join('\n') + '\n';
  }

  it('passes on the file as exported, and finds a cut tail, a dropped stream and a broken anchor', () => {
    const { file, lines } = exported();
    try {
      expect(runCli(['verify', '--archive', file]).status).toBe(0);
      const lastOfTarget = Math.max(
        ...lines.slice(1, -1).flatMap((event, index) => (event.stream === 'op-default:run_81/step_4' ? [index] : [])),
      );
      const cases: Array<[string, (event: Record<string, unknown>, index: number) => boolean, string[]]> = [
        ['a cut tail', (_event, index) => index === lastOfTarget, ['head_mismatch', 'log_anchor_mismatch']],
        [
          'a dropped stream',
          (event) => event.stream === 'op-default:run_81/step_5',
          ['stream_deleted', 'log_anchor_mismatch'],
        ],
      ];
      for (const [, drop, kinds] of cases) {
        writeFileSync(file, without(lines, drop));
        const run = runCli(['verify', '--archive', file, '--json']);
        expect(run.status).toBe(1);
        const found = (JSON.parse(run.stdout) as { findings: Array<{ kind: string }> }).findings.map(
          (finding) => finding.kind,
        );
        for (const kind of kinds) expect(found).toContain(kind);
        // And import refuses such a file before writing anything.
        const target = tempDataDir('import-cut');
        const imported = runCli(['import', file, '--data-dir', target]);
        expect(imported.status).toBe(1);
        expect(imported.stderr).toMatch(/nothing was imported/);
        rmSync(target, { recursive: true, force: true });
      }
    } finally {
      rmSync(file, { force: true });
    }
  });
});
