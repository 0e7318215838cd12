/**
 * `recovery-ledger export --format cloudevents` on a data directory, through the built CLI: every
 * line is a CloudEvent that the `cloudevents` package accepts (its constructor validates, and
 * `HTTP.toEvent` reads the line as a structured-mode request body), with subject = operation_ref
 * and the hash chain as extension attributes that link each event to the one before it.
 */
import { rmSync } from 'node:fs';
import { CloudEvent, HTTP } from 'cloudevents';
import { openSeeder, runCli, seedIncident, tempDataDir } from '../support/cli-harness';

describe('export --format cloudevents', () => {
  let dir: string;
  beforeAll(async () => {
    dir = tempDataDir('cloudevents');
    const seeder = await openSeeder(dir);
    await seedIncident(seeder);
    await seeder.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes one valid CloudEvent per ledger event, subject the operation_ref, the chain hash as an extension', () => {
    const run = runCli(['export', '--data-dir', dir, '--format', 'cloudevents']);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe('exported 23 events in 3 streams\n');
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(23);
    const archive = runCli(['export', '--data-dir', dir])
      .stdout.trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line))
      .filter((line) => line.kind === 'event');

    lines.forEach((line, index) => {
      const raw = JSON.parse(line);
      const event = new CloudEvent(raw); // validates against the spec; throws ValidationError otherwise
      const received = HTTP.toEvent({
        headers: { 'content-type': 'application/cloudevents+json; charset=utf-8' },
        body: line,
      }) as CloudEvent;
      expect(received.validate()).toBe(true);
      const stored = archive[index];
      expect(event).toMatchObject({
        specversion: '1.0',
        id: stored.event_id,
        type: `dev.recovery-ledger.${stored.type}`,
        subject: stored.metadata.operation_ref,
        time: new Date(stored.metadata.recorded_at).toISOString(),
        chainhash: stored.metadata.hash,
        chainprevhash: stored.metadata.prev_hash,
        ledgerstream: stored.stream,
        ledgerposition: stored.position,
      });
      expect(received.data).toEqual(stored.data);
      expect(received.subject).toBe(stored.metadata.operation_ref);
    });
    // The chain holds across the CloudEvents of one stream: each prev hash is the hash before it.
    const step4 = lines.map((line) => JSON.parse(line)).filter((event) => event.subject === 'run_81/step_4');
    for (let i = 1; i < step4.length; i++) expect(step4[i].chainprevhash).toBe(step4[i - 1].chainhash);
    process.stdout.write(`${lines[0]}\n`);
  });

  it('refuses an unknown format without writing', () => {
    const run = runCli(['export', '--data-dir', dir, '--format', 'xml']);
    expect(run.status).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/--format.*xml/);
  });
});
