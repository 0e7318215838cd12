/**
 * `recovery-ledger export --format cloudevents` on a data directory, through the built CLI: every
 * line is a CloudEvent that the `cloudevents` package accepts (its constructor validates, and
 * `HTTP.toEvent` reads the line as a structured-mode request body), with subject = operation_ref
 * and the hash chain as extension attributes that link each event to the one before it.
 */
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { CloudEvent, HTTP } from 'cloudevents';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { openSeeder, runCli, seedIncident, tempDataDir } from '../support/cli-harness';

const OPERATOR_REF = 'run_83/step_1';
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/**
 * A third party's check, written from docs/operations.md alone (no code of the ledger): canonical
 * JSON (keys sorted, no whitespace, undefined members dropped), and each event's hash recomputed
 * from the attributes of its CloudEvent, linked to the hash before it in its stream.
 */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, member]) => member !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonical(member)}`).join(',')}}`;
  }
  return JSON.stringify(value);
};

function recomputedHash(event: CloudEvent<unknown>): string {
  const attribute = (name: string) => (event as unknown as Record<string, unknown>)[name];
  const lease = attribute('ledgerlease');
  const metadata = {
    schema_version: attribute('ledgerschemaversion'),
    recorded_at: event.time,
    actor: attribute('ledgeractor'),
    tenant: attribute('ledgertenant'),
    operation_ref: event.subject,
    causation_event_id: attribute('ledgercausation'),
    traceparent: attribute('traceparent'),
    tracestate: attribute('tracestate'),
    lease: typeof lease === 'string' ? (JSON.parse(lease) as unknown) : undefined,
    submitted_hash: attribute('ledgersubmittedhash'),
    prev_hash: attribute('chainprevhash'),
  };
  const body = canonical({
    stream: attribute('ledgerstream'),
    revision: attribute('ledgerrevision'),
    event_id: event.id,
    type: event.type.replace(/^dev\.recovery-ledger\./, ''),
    data: event.data,
    metadata,
  });
  return createHash('sha256')
    .update(`${String(metadata.prev_hash)}\n${body}`)
    .digest('hex');
}

/** The ids of the events whose hash or link does not hold; empty when the whole export checks. */
function chainBreaks(lines: readonly string[]): string[] {
  const last = new Map<unknown, string>();
  const breaks: string[] = [];
  for (const line of lines) {
    const event = new CloudEvent<unknown>(JSON.parse(line) as object);
    const attribute = (name: string) => (event as unknown as Record<string, unknown>)[name];
    const stream = attribute('ledgerstream');
    const linked = attribute('chainprevhash') === (last.get(stream) ?? '0'.repeat(64));
    if (!linked || recomputedHash(event) !== attribute('chainhash')) breaks.push(event.id);
    last.set(stream, String(attribute('chainhash')));
  }
  return breaks;
}

describe('export --format cloudevents', () => {
  let dir: string;
  beforeAll(async () => {
    dir = tempDataDir('cloudevents');
    const seeder = await openSeeder(dir);
    await seedIncident(seeder);
    // An escalation a person takes, with the trace context of the console, beside a dispatch under a lease.
    await seeder.submit(OPERATOR_REF, 'StepPlanned', {
      run_id: 'run_83',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:83aa',
    });
    await seeder.submit(
      OPERATOR_REF,
      'AttemptDispatched',
      { attempt: 1, input_hash: 'sha256:83aa' },
      { lease: { lease_id: 'lease-83', holder: 'worker-7', current: true } },
    );
    await seeder.submit(OPERATOR_REF, 'EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.alreadyPaid(OPERATOR_REF),
    });
    await seeder.submit(
      OPERATOR_REF,
      'EscalationAcknowledged',
      { assignee: 'ana', note: 'calling the provider' },
      { actor: 'ops-ana', traceparent: TRACEPARENT, tracestate: 'rojo=00f067aa0ba902b7' },
    );
    await seeder.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes one valid CloudEvent per ledger event, subject the operation_ref, the chain hash as an extension', () => {
    const run = runCli(['export', '--data-dir', dir, '--format', 'cloudevents']);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe('exported 30 events in 4 streams\n');
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(30);
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

  it('carries every field its chain hash covers: a third party recomputes the chain from the export alone', () => {
    const run = runCli(['export', '--data-dir', dir, '--format', 'cloudevents']);
    expect(run.status).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(chainBreaks(lines)).toEqual([]);
    // The operator's action names its actor and the trace it came with; the leased dispatch its lease.
    const operator = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(operator.find((event) => event.type === 'dev.recovery-ledger.EscalationAcknowledged')).toMatchObject({
      ledgeractor: 'ops-ana',
      ledgertenant: 'default',
      traceparent: TRACEPARENT,
      tracestate: 'rojo=00f067aa0ba902b7',
    });
    expect(
      operator.find(
        (event) => event.subject === OPERATOR_REF && event.type === 'dev.recovery-ledger.AttemptDispatched',
      ),
    ).toMatchObject({ ledgerlease: JSON.stringify({ lease_id: 'lease-83', holder: 'worker-7', current: true }) });
  });

  it('an altered data or actor fails that check, at the event altered', () => {
    const lines = runCli(['export', '--data-dir', dir, '--format', 'cloudevents']).stdout.trimEnd().split('\n');
    const alter = (index: number, change: (event: Record<string, unknown>) => void) => {
      const copy = [...lines];
      const event = JSON.parse(copy[index]) as Record<string, unknown>;
      change(event);
      copy[index] = JSON.stringify(event);
      return { id: event.id, breaks: chainBreaks(copy) };
    };
    const dispatch = lines.findIndex((line) => line.includes('"dev.recovery-ledger.AttemptDispatched"'));
    const altered = alter(dispatch, (event) => ((event.data as { input_hash: string }).input_hash = 'sha256:other'));
    expect(altered.breaks).toEqual([altered.id]);
    const ack = lines.findIndex((line) => line.includes('"dev.recovery-ledger.EscalationAcknowledged"'));
    const reattributed = alter(ack, (event) => (event.ledgeractor = 'someone-else'));
    expect(reattributed.breaks).toEqual([reattributed.id]);
  });

  it('refuses an unknown format without writing', () => {
    const run = runCli(['export', '--data-dir', dir, '--format', 'xml']);
    expect(run.status).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/--format.*xml/);
  });
});
