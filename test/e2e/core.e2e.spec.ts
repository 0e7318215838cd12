/**
 * The core contract over real HTTP against the built service as a process of its own, one describe
 * block per subject: late outcomes and approvals bound to an input, and racing requests and kills.
 * Each block keeps its own header, constants and hooks. Malformed input needs no process of its own:
 * test/int/core-malformed.int.spec.ts.
 */

import { randomUUID, createHash } from 'node:crypto';
import { operationStream } from '../../src/store/stream-names';
import { verifyChain } from '../../src/integrity/hash-chain';
import { fact, ledgerAt, type HttpAnswer, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  envelopes,
  ok,
  operation,
  problem,
  readEventRows,
  refusal,
  streamsOf,
  uniqueRef,
  type Ledger,
} from '../support/scenario';
import { setTimeout as sleep } from 'node:timers/promises';
import { runCli } from '../support/cli-harness';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

describe('races and kills', () => {
  /**
   * Concurrency and crashes over real HTTP against the built server.
   *
   * (a) Racing requests on one operation are decided at the revision they read: of 20 simultaneous
   *     dispatches exactly one wins and the rest get a typed 409, and the stream shows one dispatch.
   * (b) SIGKILL under concurrent load, three times on one data directory: after each restart every
   *     acknowledged fact is in the log exactly once (with what it caused, appended atomically),
   *     every stream's revisions are contiguous and its hash chain verifies, and requests that were in
   *     flight at the kill can be resubmitted safely. A kill of the process (not of the machine) does
   *     not drop the OS page cache, so this proves "acknowledged only after COMMIT", not the fsync.
   */
  const SEED = 20261202;
  const TENANT = 'default'; // local mode

  /** A small seeded PRNG (mulberry32), so a failing kill moment can be reproduced from the seed. */
  function prng(seed: number) {
    let state = seed >>> 0;
    return () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  describe('racing requests on one operation', () => {
    let ledger: LedgerProcess;
    let api: Ledger;

    beforeAll(async () => {
      ledger = await startLedger();
      api = ledgerAt(ledger.baseUrl);
    });

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    test('20 simultaneous dispatches: exactly one 200, nineteen typed 409 ATTEMPT_IN_FLIGHT, one AttemptDispatched', async () => {
      const op = operation(api, uniqueRef('charge'));
      ok(await op.plan());
      const answers = await Promise.all(Array.from({ length: 20 }, () => op.dispatch(1)));

      expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
      const refused = answers.filter((answer) => answer.status !== 200);
      expect(refused).toHaveLength(19);
      for (const answer of refused) refusal(answer, 'ATTEMPT_IN_FLIGHT');

      const events = await op.events();
      expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
      // Each refused dispatch is evidence of a duplicate write prevented, recorded once.
      expect(events.filter((event) => event.type === 'DispatchRefused').map((event) => event.data.code)).toEqual(
        Array(19).fill('ATTEMPT_IN_FLIGHT'),
      );
      const stream = streamsOf(readEventRows(ledger.dataDir)).get(operationStream(TENANT, op.ref)) ?? [];
      expect(verifyChain(stream)).toBeUndefined();
    });

    test('20 simultaneous dispatches at one expected_revision: one 200, nineteen REVISION_CONFLICT, nothing else stored', async () => {
      const op = operation(api, uniqueRef('charge'));
      const planned = ok(await op.plan());
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => op.dispatch(1, undefined, randomUUID(), planned.revision)),
      );
      expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
      for (const answer of answers.filter((a) => a.status !== 200)) problem(answer, 409, 'REVISION_CONFLICT');
      expect((await op.events()).map((event) => event.type)).toEqual([
        'StepPlanned',
        'TransitionRecorded',
        'AttemptDispatched',
        'TransitionRecorded',
      ]);
    });

    test('20 simultaneous envelopes for the one attempt in flight: exactly one is recorded', async () => {
      const op = operation(api, uniqueRef('charge'));
      ok(await op.plan());
      ok(await op.dispatch(1));
      const answers = await Promise.all(Array.from({ length: 20 }, () => op.record(1, envelopes.success(op.ref))));
      expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
      // Once the first landed, the attempt is no longer in flight: the others are for no attempt.
      for (const answer of answers.filter((a) => a.status !== 200)) refusal(answer, 'ATTEMPT_MISMATCH');
      expect((await op.events()).filter((event) => event.type === 'EnvelopeRecorded')).toHaveLength(1);
    });
  });

  // ---- (b) kills under load ---------------------------------------------------------------------------

  interface Submission {
    ref: string;
    events: Array<{ event_id: string; type: string; data: unknown }>;
  }

  interface Acknowledged {
    stream: string;
    event_id: string;
    /** The types it may be stored as: the fact itself, or a DispatchRefused standing for it. */
    types: string[];
  }

  /** Refusals of a dispatch that the ledger records as DispatchRefused before it answers. */
  const RECORDED_REFUSALS = new Set([
    'ATTEMPT_IN_FLIGHT',
    'VERIFY_BEFORE_RETRY',
    'UNCHANGED_RETRY',
    'RETRY_NOT_BEFORE',
    'APPROVAL_REQUIRED',
    'ATTEMPTS_EXHAUSTED',
    'STEP_ESCALATED',
    'ATTEMPT_MISMATCH',
  ]);

  class Load {
    readonly acknowledged: Acknowledged[] = [];
    readonly inFlight = new Set<Submission>();
    readonly unexpected: string[] = [];
    stopped = false;

    constructor(private api: Ledger) {}

    /** Submits and books the answer. undefined: the connection died (the kill), the request is in doubt. */
    async submit(ref: string, events: Submission['events'], expectOk: boolean): Promise<HttpAnswer | undefined> {
      const submission = { ref, events };
      this.inFlight.add(submission);
      let answer: HttpAnswer;
      try {
        answer = await this.api.submit(ref, events);
      } catch {
        this.stopped = true;
        return undefined;
      }
      this.inFlight.delete(submission);
      this.book(submission, answer);
      if (answer.status >= 500 || (expectOk && answer.status !== 200)) {
        this.unexpected.push(`${ref} ${events[0].type} -> ${answer.status} ${JSON.stringify(answer.body)}`);
      }
      return answer;
    }

    book(submission: Submission, answer: HttpAnswer): void {
      const stream = operationStream(TENANT, submission.ref);
      const results: Array<{ status: string }> = answer.body?.results ?? [];
      // A plan repeated with the same definition answers 200 without appending: only a stored fact
      // counts, so acknowledgements are taken from dispatches, envelopes and verifications, and plans
      // are only ever submitted once per ref here.
      if (answer.status === 200 && results.length === submission.events.length) {
        for (const event of submission.events)
          this.acknowledged.push({
            stream,
            event_id: event.event_id,
            // A late envelope the ledger accepts (a late success that settles the step, a late unknown
            // that sends it back to verifying) is stored as LateOutcomeRecorded (docs/contract.md §4.9).
            types:
              event.type === 'EnvelopeRecorded'
                ? ['EnvelopeRecorded', 'LateOutcomeRecorded']
                : [event.type, 'DispatchRefused'],
          });
      } else if (
        answer.status === 409 &&
        submission.events[0].type === 'AttemptDispatched' &&
        RECORDED_REFUSALS.has(answer.body?.code)
      ) {
        this.acknowledged.push({ stream, event_id: submission.events[0].event_id, types: ['DispatchRefused'] });
      }
    }
  }

  const planFact = (ref: string, policy?: Record<string, unknown>) =>
    fact('StepPlanned', {
      run_id: ref.split('/')[0],
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:input-1',
      ...(policy ? { policy } : {}),
    });

  /** A runtime working through its own operations: plan, dispatch, then success or verify. */
  async function worker(load: Load, prefix: string, random: () => number): Promise<void> {
    for (let index = 0; !load.stopped; index++) {
      const ref = `${prefix}/op_${index}`;
      if (!(await load.submit(ref, [planFact(ref)], true))) return;
      if (!(await load.submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:input-1' })], true)))
        return;
      if (random() < 0.5) {
        if (
          !(await load.submit(ref, [fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.success(ref) })], true))
        )
          return;
      } else {
        if (
          !(await load.submit(
            ref,
            [fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.outcomeUnknown(ref) })],
            true,
          ))
        )
          return;
        if (
          !(await load.submit(
            ref,
            [fact('VerificationRecorded', { outcome: 'found_committed', checked_at: new Date().toISOString() })],
            true,
          ))
        )
          return;
      }
    }
  }

  /** Runtimes racing on shared operations: each reads the state and submits what it allows. */
  async function contender(load: Load, api: Ledger, refs: string[], random: () => number): Promise<void> {
    while (!load.stopped) {
      const ref = refs[Math.floor(random() * refs.length)];
      let state: HttpAnswer;
      try {
        state = await api.state(ref);
      } catch {
        return;
      }
      const { status, attempts_used: used, current_attempt: current } = state.body ?? {};
      let events: Submission['events'];
      if (status === 'planned' || status === 'retry_ready')
        events = [fact('AttemptDispatched', { attempt: used + 1, input_hash: 'sha256:input-1' })];
      else if (status === 'dispatched')
        events = [fact('EnvelopeRecorded', { attempt: current, envelope: envelopes.outcomeUnknown(ref) })];
      else if (status === 'verifying')
        events = [fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() })];
      else continue;
      if (!(await load.submit(ref, events, false))) return;
    }
  }

  /** Everything the log must satisfy after a restart; answers the breaches, to show them all. */
  function checkLog(dataDir: string, acknowledged: Acknowledged[]): string[] {
    const rows = readEventRows(dataDir);
    const breaches: string[] = [];
    const byId = new Map<string, typeof rows>();
    for (const row of rows) byId.set(row.event_id, [...(byId.get(row.event_id) ?? []), row]);
    for (const ack of acknowledged) {
      const found = byId.get(ack.event_id) ?? [];
      if (found.length !== 1)
        breaches.push(`acknowledged ${ack.event_id} (${ack.types[0]}) is in the log ${found.length} times`);
      else if (found[0].stream !== ack.stream || !ack.types.includes(found[0].type))
        breaches.push(`acknowledged ${ack.event_id} stored as ${found[0].stream} ${found[0].type}`);
    }
    for (const [stream, events] of streamsOf(rows)) {
      const revisions = events.map((event) => event.revision);
      if (revisions.some((revision, index) => revision !== index))
        breaches.push(`${stream}: revisions not contiguous: ${revisions.join(',')}`);
      const broken = verifyChain(events);
      if (broken) breaches.push(`${stream}: hash chain breaks at ${broken.revision} (${broken.reason})`);
      // A fact and what it caused were one atomic append: no accepted fact without its transition.
      // A refused dispatch and a refused late envelope are recorded alone (docs/contract.md §3, §4.9).
      events.forEach((event, index) => {
        if (
          event.type === 'DispatchRefused' ||
          event.type === 'TransitionRecorded' ||
          event.type === 'LateOutcomeRecorded'
        )
          return;
        const next = events[index + 1];
        if (!next || next.type !== 'TransitionRecorded' || next.metadata.causation_event_id !== event.event_id) {
          breaches.push(`${stream}: ${event.type} at ${event.revision} has no TransitionRecorded after it`);
        }
      });
    }
    return breaches;
  }

  describe('SIGKILL under concurrent load', () => {
    test('three kill cycles on one data directory lose no acknowledged fact and keep every stream whole', async () => {
      const random = prng(SEED);
      let ledger = await startLedger();
      const dataDir = ledger.dataDir;
      const acknowledged: Acknowledged[] = [];
      try {
        for (let cycle = 0; cycle < 3; cycle++) {
          const api = ledgerAt(ledger.baseUrl);
          const load = new Load(api);
          const shared = Array.from({ length: 3 }, (_, i) => `run_c${cycle}/shared_${i}`);
          for (const ref of shared)
            ok(
              await api.submit(ref, [
                planFact(ref, {
                  max_attempts: 100,
                  consistency_window_ms: 0,
                  max_consecutive_dependency_failures: 100,
                }),
              ]),
            );

          const threshold = 60 + Math.floor(random() * 200);
          const running = [
            ...Array.from({ length: 6 }, (_, w) => worker(load, `run_k${cycle}_w${w}`, random)),
            ...Array.from({ length: 3 }, () => contender(load, api, shared, random)),
          ];
          // The kill comes at a random moment once some facts have been acknowledged (not a timing
          // assertion: how long this takes does not matter, only that the server is mid-load).
          while (load.acknowledged.length < threshold) await sleep(2);
          await sleep(Math.floor(random() * 20));
          await ledger.kill();
          load.stopped = true;
          await Promise.all(running);
          expect(load.unexpected).toEqual([]);
          acknowledged.push(...load.acknowledged);

          ledger = await ledger.restart();
          expect({ cycle, breaches: checkLog(dataDir, acknowledged) }).toEqual({ cycle, breaches: [] });

          // What was in flight at the kill is in doubt; resubmitting it (same event ids) is safe:
          // a typed answer, and nothing in the log twice.
          const after = ledgerAt(ledger.baseUrl);
          const resubmitter = new Load(after);
          for (const submission of load.inFlight) {
            const answer = await after.submit(submission.ref, submission.events);
            expect({
              status: answer.status < 500,
              typed: answer.status === 200 || typeof answer.body?.code === 'string',
            }).toEqual({ status: true, typed: true });
            resubmitter.book(submission, answer);
          }
          acknowledged.push(...resubmitter.acknowledged);
          expect({ cycle, breaches: checkLog(dataDir, acknowledged) }).toEqual({ cycle, breaches: [] });
          expect(load.inFlight.size).toBeGreaterThan(0);
        }
        expect(acknowledged.length).toBeGreaterThan(180);
      } finally {
        await ledger.kill();
        ledger.cleanup();
      }
    });
  });
});

describe('late outcomes and approvals bound to an input', () => {
  /**
   * When an attempt may still reach the provider, late envelopes, and approvals bound to an input
   * (docs/contract.md §4.4, §4.5, §4.9; docs/reliability.md "When an attempt may still reach the
   * provider"), over real HTTP against the built service.
   */
  const RUNTIME_KEY = 'reach-runtime-key-000000001';
  const APPROVER_KEY = 'reach-approver-key-00000001';
  const METRICS_KEY = 'reach-metrics-key-000000001';
  const RUN = `run_${randomUUID().slice(0, 6)}`;
  const hash = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex');
  const H1 = hash({ customer: 'cus_1', amount_cents: 1000 });
  const H2 = hash({ customer: 'cus_2', amount_cents: 100_000_000 });

  let ledger: LedgerProcess;
  let runtime: ReturnType<typeof ledgerAt>;
  let approver: ReturnType<typeof ledgerAt>;

  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${APPROVER_KEY}:approver:acme,${METRICS_KEY}:metrics:*` },
    });
    runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
    approver = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${APPROVER_KEY}` });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const plan = (
    ref: string,
    inputHash = H1,
    policy: Record<string, number> = { consistency_window_ms: 1_000, dispatch_timeout_ms: 1_000 },
  ) =>
    runtime.submit(ref, [
      fact('StepPlanned', { run_id: RUN, tool: 'create_invoice', side_effect: 'write', input_hash: inputHash, policy }),
    ]);
  const dispatch = (ref: string, attempt: number, inputHash = H1, extra: Record<string, unknown> = {}) =>
    runtime.submit(ref, [fact('AttemptDispatched', { attempt, input_hash: inputHash, ...extra })]);
  const notFound = (ref: string) =>
    runtime.submit(ref, [fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() })]);

  describe('a not_found is conclusive only a consistency window after the attempt can no longer reach the provider', () => {
    it('answers the call deadline with the grant, and refuses a not_found until the deadline plus the window', async () => {
      const ref = `${RUN}/silent_1`;
      await plan(ref);
      const granted = await dispatch(ref, 1, H1, { call_window_ms: 500 });
      expect(granted.status).toBe(200);
      const { since, call_deadline } = granted.body.state as { since: string; call_deadline: string };
      expect(Date.parse(call_deadline) - Date.parse(since)).toBe(500);

      // The old rule measured the window from the dispatch: 1,000 ms. Now it runs from the deadline.
      const early = await notFound(ref);
      expect(early.status).toBe(409);
      expect(early.body).toMatchObject({
        code: 'VERIFICATION_PREMATURE',
        directive: { next_action: 'verify_operation' },
      });
      expect(early.body.directive.not_before).toBe(new Date(Date.parse(call_deadline) + 1_000).toISOString());
      expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

      await until(
        () => notFound(ref),
        (answer) => answer.status === 200,
        'a conclusive not_found',
      );
      expect((await runtime.state(ref)).body).toMatchObject({ status: 'retry_ready' });
    });

    it('a forged call_deadline in the dispatch is refused at the edge', async () => {
      const ref = `${RUN}/forged_1`;
      await plan(ref);
      const forged = await dispatch(ref, 1, H1, { call_deadline: new Date(0).toISOString() });
      expect(forged.status).toBe(400);
      expect(forged.body).toMatchObject({ code: 'BAD_REQUEST' });
      expect((await runtime.state(ref)).body.status).toBe('planned');
    });
  });

  describe('a late envelope is evidence', () => {
    it('records a paused dispatcher’s late success as a possible duplicate, in the state, the evidence, triage and /metrics', async () => {
      const ref = `${RUN}/paused_1`;
      await plan(ref);
      await dispatch(ref, 1, H1, { call_window_ms: 200 });
      await until(
        () => notFound(ref),
        (answer) => answer.status === 200,
        'a conclusive not_found',
      );
      expect((await dispatch(ref, 2)).status).toBe(200);

      // Attempt 1's dispatcher wakes up and reports what it did.
      const lateId = randomUUID();
      const lateFact = fact(
        'EnvelopeRecorded',
        { attempt: 1, envelope: seedEnvelopes.success(ref, 'inv_late') },
        lateId,
      );
      const late = await runtime.submit(ref, [lateFact]);
      expect(late.status).toBe(409);
      expect(late.body).toMatchObject({
        code: 'ATTEMPT_MISMATCH',
        state: { status: 'dispatched', current_attempt: 2, possible_duplicate: { attempt: 1 } },
      });

      const events = (await runtime.events(ref)).body.events as Array<{
        type: string;
        event_id: string;
        data: Record<string, unknown>;
      }>;
      const recorded = events.filter((event) => event.type === 'LateOutcomeRecorded');
      expect(recorded).toEqual([
        expect.objectContaining({
          event_id: lateId,
          data: expect.objectContaining({ attempt: 1, possible_duplicate: true }),
        }),
      ]);

      // Sent again under its id: answered as the first time, nothing appended.
      const again = await runtime.submit(ref, [lateFact]);
      expect(again.status).toBe(409);
      expect(again.body.code).toBe('ATTEMPT_MISMATCH');
      expect((await runtime.events(ref)).body.events).toHaveLength(events.length);

      const position = Math.max(
        ...(await runtime.events(ref)).body.events.map((event: { position: number }) => event.position),
      );
      const get = (path: string) =>
        request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${RUNTIME_KEY}` });
      const evidence = await get(`/v1/operations/${encodeURIComponent(ref)}/evidence?wait_for_position=${position}`);
      expect(evidence.body.possible_duplicate).toMatchObject({ attempt: 1, event_id: lateId });
      // The CLI folds the same trail from the data directory and answers it in the same words.
      const local = runCli(['evidence', ref, '--data-dir', ledger.dataDir, '--tenant', 'acme', '--json']);
      expect(local.status).toBe(0);
      const { as_of_position: _asOf, ...served } = evidence.body;
      expect(JSON.parse(local.stdout)).toEqual(served);
      expect(evidence.body.entries.map((entry: { summary: string }) => entry.summary)).toContain(
        'late envelope of attempt 1: committed after a later attempt was granted: attempts 1 and 2 may each have reached the provider: possible duplicate write',
      );
      const triage = await get(`/v1/triage?kind=possible_duplicate&wait_for_position=${position}`);
      expect(triage.body.items).toEqual([
        expect.objectContaining({ kind: 'possible_duplicate', operation_ref: ref, status: 'dispatched' }),
      ]);
      const listed = await get(`/v1/operations?has=possible_duplicates&wait_for_position=${position}`);
      expect(listed.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([ref]);
      const trust = await get(`/v1/metrics/trust?wait_for_position=${position}`);
      expect(trust.body.overall.possible_duplicates).toBe(1);
      const metrics = await request(ledger.baseUrl, 'GET', '/metrics', undefined, {
        authorization: `Bearer ${METRICS_KEY}`,
      });
      expect(String(metrics.body)).toMatch(
        /^ledger_trust_possible_duplicates_total\{tenant="acme",tool="create_invoice"\} 1$/m,
      );
    });

    it('records a late unknown outcome after a later attempt was granted as a possible duplicate, in the evidence, triage and the trust metrics', async () => {
      const ref = `${RUN}/paused_unknown_1`;
      await plan(ref);
      await dispatch(ref, 1, H1, { call_window_ms: 200 });
      await until(
        () => notFound(ref),
        (answer) => answer.status === 200,
        'a conclusive not_found',
      );
      expect((await dispatch(ref, 2)).status).toBe(200);
      const created = await runtime.submit(ref, [
        fact('EnvelopeRecorded', { attempt: 2, envelope: seedEnvelopes.success(ref, 'inv_2') }),
      ]);
      expect(created.body.state.status).toBe('succeeded');

      // Attempt 1's dispatcher wakes and its call is cut off after it may have left: unknown.
      const lateId = randomUUID();
      const late = await runtime.submit(ref, [
        fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }, lateId),
      ]);
      expect(late.status).toBe(409);
      expect(late.body).toMatchObject({
        code: 'ATTEMPT_MISMATCH',
        state: { status: 'succeeded', possible_duplicate: { attempt: 1 } },
      });
      const events = (await runtime.events(ref)).body.events as Array<{ type: string; data: Record<string, unknown> }>;
      expect(events.filter((event) => event.type === 'LateOutcomeRecorded')).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ attempt: 1, possible_duplicate: true }) }),
      ]);

      const position = Math.max(
        ...(await runtime.events(ref)).body.events.map((event: { position: number }) => event.position),
      );
      const get = (path: string) =>
        request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${RUNTIME_KEY}` });
      const evidence = await get(`/v1/operations/${encodeURIComponent(ref)}/evidence?wait_for_position=${position}`);
      expect(evidence.body.possible_duplicate).toMatchObject({ attempt: 1, event_id: lateId });
      expect(evidence.body.entries.map((entry: { summary: string }) => entry.summary)).toContain(
        'late envelope of attempt 1: OUTCOME_UNKNOWN, unknown after a later attempt was granted: attempts 1 and 2 may each have reached the provider: possible duplicate write',
      );
      const triage = await get(`/v1/triage?kind=possible_duplicate&wait_for_position=${position}`);
      expect(triage.body.items).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ kind: 'possible_duplicate', operation_ref: ref, status: 'succeeded' }),
        ]),
      );
      const trust = await get(`/v1/metrics/trust?wait_for_position=${position}`);
      // The late success of paused_1 above, and this one.
      expect(trust.body.overall.possible_duplicates).toBe(2);
    });

    it('a late unknown outcome of the attempt verified not_found, before another was granted, sends the step back to verifying', async () => {
      const ref = `${RUN}/reopened_1`;
      await plan(ref);
      await dispatch(ref, 1, H1, { call_window_ms: 200 });
      await until(
        () => notFound(ref),
        (answer) => answer.status === 200,
        'a conclusive not_found',
      );
      const lateFact = fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) });
      const late = await runtime.submit(ref, [lateFact]);
      expect(late.status).toBe(200);
      // Sent again under its id: answered as the first time.
      const again = await runtime.submit(ref, [lateFact]);
      expect(again.status).toBe(200);
      expect(again.body.state).toMatchObject({ status: 'verifying', reason: 'LATE_OUTCOME_UNKNOWN' });
      expect(late.body).toMatchObject({
        state: { status: 'verifying', reason: 'LATE_OUTCOME_UNKNOWN' },
        directive: { next_action: 'verify_operation' },
      });
      const retry = await dispatch(ref, 2);
      expect(retry.status).toBe(409);
      expect(retry.body.code).toBe('VERIFY_BEFORE_RETRY');
      // The lookup counts again only a consistency window after the late report.
      const early = await notFound(ref);
      expect(early.body.code).toBe('VERIFICATION_PREMATURE');
    });

    it('a late success of the last attempt granted settles the step: the next dispatch replays it', async () => {
      const ref = `${RUN}/settle_1`;
      await plan(ref);
      await dispatch(ref, 1, H1, { call_window_ms: 200 });
      await until(
        () => notFound(ref),
        (answer) => answer.status === 200,
        'a conclusive not_found',
      );
      const late = await runtime.submit(ref, [
        fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(ref, 'inv_9') }),
      ]);
      expect(late.status).toBe(200);
      expect(late.body.state).toMatchObject({ status: 'succeeded', reason: 'LATE_SUCCESS' });
      const replay = await dispatch(ref, 2);
      expect(replay.body).toMatchObject({ replayed: true, state: { status: 'succeeded' } });
    });
  });

  describe('an approval binds to the input it was asked for', () => {
    it('after a granted approval, another input is refused and waits for its own approval', async () => {
      const ref = `${RUN}/refund_1`;
      await plan(ref);
      await dispatch(ref, 1);
      const asked = await runtime.submit(ref, [
        fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.missingApproval(ref) }),
      ]);
      expect(asked.body.state).toMatchObject({ status: 'awaiting_approval', approval_input_hash: H1 });

      const granted = await approver.submit(ref, [
        fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example' }),
      ]);
      expect(granted.status).toBe(200);
      const stored = (await runtime.events(ref)).body.events.find(
        (event: { type: string }) => event.type === 'ApprovalRecorded',
      );
      expect(stored.data).toMatchObject({ decision: 'granted', input_hash: H1 });

      const other = await dispatch(ref, 2, H2);
      expect(other.status).toBe(409);
      expect(other.body).toMatchObject({
        code: 'APPROVAL_REQUIRED',
        state: { status: 'awaiting_approval', approval_input_hash: H2 },
      });
      // An approver who names the first input for this request is refused: it asks for H2.
      const stale = await approver.submit(ref, [
        fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example', input_hash: H1 }),
      ]);
      expect(stale.status).toBe(409);
      expect(stale.body.code).toBe('FACT_NOT_EXPECTED');
      const second = await approver.submit(ref, [
        fact('ApprovalRecorded', { decision: 'granted', approver: 'ops@acme.example', input_hash: H2 }),
      ]);
      expect(second.status).toBe(200);
      expect((await dispatch(ref, 2, H2)).body.state).toMatchObject({ status: 'dispatched', current_attempt: 2 });
    });
  });
});
