/**
 * The contract table as a runtime drives it, over real HTTP against the built service, on both
 * stores: SQLite, then EventStoreDB through the protocol double (docs/contract.md §4, §6); and the
 * other end-to-end checks of the service on EventStoreDB: the lag metric, and two instances on one
 * server. One describe block per subject, each with its own header, constants and hooks; the table
 * is one function, run in each store's block.
 */

import { until } from '../support/until';
import { randomUUID } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { ledgerAt, request, fact, opPath, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  INPUT_1,
  INPUT_2,
  envelopes,
  inMs,
  ok,
  operation,
  problem,
  refusal,
  uniqueRef,
  waitUntilPast,
  type Ledger,
} from '../support/scenario';
import { eventStoreDbStore, postgresStore, sqliteStore, type StoreSetup } from '../support/store-setup';
import { describeWithPostgres } from '../support/postgres';
import { NO_STREAM, type StoredEvent } from '../../src/store/event-store.port';
import { newEvent } from '../contract/event-store.contract';
import { startCli } from '../support/cli-harness';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { verifyChain } from '../../src/integrity/hash-chain';
import { operationStream } from '../../src/store/stream-names';

/**
 * Two instances as one client sees them behind a load balancer: submits go to each in turn, and a
 * read goes to the instance that did not take the last submit.
 */
function inTurn(first: Ledger, second: Ledger): Ledger {
  const both = [first, second];
  let turn = 0;
  return {
    submit: (...args) => both[turn++ % 2].submit(...args),
    state: (...args) => both[turn % 2].state(...args),
    events: (...args) => both[turn % 2].events(...args),
  };
}

/**
 * The contract table (docs/contract.md §4), driven over real HTTP against the built server the way a runtime
 * drives it: plan, ask to dispatch, record what the tool returned, verify, approve. Each row asserts
 * the HTTP answers (status, problem code, directive) and the state the stream folds to, so a row
 * fails if the ledger stops enforcing the invariant behind it. Times are the server's clock; where
 * a row has to wait for `not_before`, the test waits for the instant to pass, it never measures.
 *
 * The store is the caller's (test/support/store-setup.ts): SQLite in the first block below,
 * EventStoreDB through the protocol double in the second, PostgreSQL in the third. Where a row
 * checks that nothing was stored, it compares the whole log before and after.
 *
 * With `instances: 2` (a store several instances share), a second built instance runs on the same
 * store and the rows' facts go to the two in turn, each read going to the instance that did not
 * take the fact before it: every decision is made on a stream the other instance wrote, and every
 * answer read back is read through the other one (docs/contract.md §6).
 */
function contractTable(
  store: StoreSetup,
  { instances = 1 }: { instances?: 1 | 2 } = {},
): { instances: () => LedgerProcess[] } {
  let ledger: LedgerProcess;
  let other: LedgerProcess | undefined;
  let api: Ledger;

  beforeAll(async () => {
    await store.start();
    ledger = await startLedger({ env: store.env() });
    if (instances === 2) other = await startLedger({ env: store.env() });
    api = other ? inTurn(ledgerAt(ledger.baseUrl), ledgerAt(other.baseUrl)) : ledgerAt(ledger.baseUrl);
  });

  afterAll(async () => {
    await Promise.all([ledger?.stop(), other?.stop()]);
    ledger?.cleanup();
    other?.cleanup();
    await store.stop();
  });

  const typesOf = <E extends { type: string }>(events: E[], type: string) =>
    events.filter((event) => event.type === type);
  const refusalCodes = (events: Array<{ type: string; data: any }>) =>
    typesOf(events, 'DispatchRefused').map((event) => event.data.code);

  describe('the contract table (docs/contract.md §4)', () => {
    test('invalid address: correct_input -> needs_input; no unchanged retry; a changed input may run, within the remaining attempts', async () => {
      const op = operation(api, uniqueRef('send_email'));
      ok(await op.plan({ policy: { max_attempts: 3 } }));
      ok(await op.dispatch(1, INPUT_1));

      const needsInput = ok(await op.record(1, envelopes.invalidRecipient(op.ref, 1)));
      expect(needsInput.state.status).toBe('needs_input');
      expect(needsInput.directive).toEqual({ next_action: 'correct_input', attempts_remaining: 1 });

      // The identical request must not run again: refused, and the refusal is evidence in the stream.
      const unchanged = refusal(await op.dispatch(2, INPUT_1), 'UNCHANGED_RETRY');
      expect(unchanged.directive.next_action).toBe('correct_input');
      expect(unchanged.state.status).toBe('needs_input');

      // A corrected input (another hash) may run with the same operation_ref.
      const corrected = ok(await op.dispatch(2, INPUT_2));
      expect(corrected.state).toMatchObject({ status: 'dispatched', current_attempt: 2 });
      // In flight: the runtime awaits the tool's answer; another dispatch is refused and says so too.
      expect(corrected.directive.next_action).toBe('await_outcome');
      const inFlight = refusal(await op.dispatch(3, INPUT_2), 'ATTEMPT_IN_FLIGHT');
      expect(inFlight.directive.next_action).toBe('await_outcome');

      // The tool now says nothing remains: the step escalates and no further attempt is allowed.
      const exhausted = ok(await op.record(2, envelopes.invalidRecipient(op.ref, 0)));
      expect(exhausted.state).toMatchObject({ status: 'escalated', reason: 'ATTEMPTS_EXHAUSTED' });
      expect(refusal(await op.dispatch(3, 'sha256:input-3'), 'ATTEMPTS_EXHAUSTED').directive.next_action).toBe('none');

      const events = await op.events();
      expect(typesOf(events, 'AttemptDispatched').map((event) => event.data.input_hash)).toEqual([INPUT_1, INPUT_2]);
      expect(refusalCodes(events)).toEqual(['UNCHANGED_RETRY', 'ATTEMPT_IN_FLIGHT', 'ATTEMPTS_EXHAUSTED']);
    });

    test('read endpoint rate limit: wait_and_retry -> no dispatch before not_before (409 + Retry-After), allowed after it', async () => {
      const op = operation(api, uniqueRef('get_invoice'));
      ok(await op.plan({ side_effect: 'read', tool: 'get_invoice' }));
      ok(await op.dispatch(1));

      // The read tool's smaller form: a code and a retry direction; the ledger fills in the rest.
      const notBefore = inMs(1500);
      const scheduled = ok(await op.record(1, envelopes.readRateLimited(notBefore, 2)));
      expect(scheduled.state.status).toBe('retry_scheduled');
      expect(scheduled.directive).toEqual({
        next_action: 'wait_and_retry',
        not_before: notBefore,
        attempts_remaining: 2,
      });

      const early = await op.dispatch(2);
      const body = refusal(early, 'RETRY_NOT_BEFORE');
      expect(body.directive.not_before).toBe(notBefore);
      const retryAfter = Number(early.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 2).toBe(true);

      await waitUntilPast(notBefore);
      const allowed = ok(await op.dispatch(2));
      expect(allowed.state).toMatchObject({ status: 'dispatched', current_attempt: 2, attempts_used: 2 });
      expect(refusalCodes(await op.events())).toEqual(['RETRY_NOT_BEFORE']);
    });

    test('write socket timeout: unknown -> verifying; no second write before the lookup; found_committed -> succeeded', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan({ policy: { consistency_window_ms: 20_000 } }));
      ok(await op.dispatch(1));

      const verifying = ok(await op.record(1, envelopes.outcomeUnknown(op.ref)));
      expect(verifying.state.status).toBe('verifying');
      expect(verifying.directive.next_action).toBe('verify_operation');

      expect(refusal(await op.dispatch(2), 'VERIFY_BEFORE_RETRY').directive.next_action).toBe('verify_operation');

      // not_found inside the consistency window proves nothing: refused, with when it would count.
      const before = await store.dumpLog(ledger);
      const premature = await op.verify('not_found');
      const body = refusal(premature, 'VERIFICATION_PREMATURE');
      expect(Date.parse(body.directive.not_before)).toBeGreaterThan(Date.now());
      expect(Number(premature.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await store.dumpLog(ledger)).toBe(before);

      const found = ok(
        await op.verify('found_committed', { evidence_ref: 'inv_123', result: { invoice_id: 'inv_123' } }),
      );
      expect(found.state).toMatchObject({ status: 'succeeded', reason: 'VERIFIED_COMMITTED' });
      expect(found.state.success).toMatchObject({ attempt: 1, proven_by: 'verification', evidence_ref: 'inv_123' });
      expect(found.directive.next_action).toBe('none');

      const events = await op.events();
      expect(typesOf(events, 'AttemptDispatched')).toHaveLength(1);
      expect(refusalCodes(events)).toEqual(['VERIFY_BEFORE_RETRY']);
    });

    test('duplicate operation key: a dispatch on a succeeded step replays the original success and records DUPLICATE_PREVENTED', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      ok(await op.dispatch(1));
      expect(ok(await op.record(1, envelopes.success(op.ref, { invoice_id: 'inv_777' }))).state.status).toBe(
        'succeeded',
      );

      const replay = ok(await op.dispatch(2));
      expect(replay.replayed).toBe(true);
      expect(replay.success).toMatchObject({ attempt: 1, proven_by: 'envelope', result: { invoice_id: 'inv_777' } });
      expect(replay.state.status).toBe('succeeded');

      const events = await op.events();
      expect(typesOf(events, 'AttemptDispatched')).toHaveLength(1);
      expect(typesOf(events, 'DispatchRefused').map((event) => event.data)).toEqual([
        expect.objectContaining({ code: 'DUPLICATE_PREVENTED', attempt: 2, replayed_attempt: 1 }),
      ]);
    });

    test('lost approval: request_approval -> no dispatch until granted; a denial escalates', async () => {
      const op = operation(api, uniqueRef('deploy'));
      ok(await op.plan());
      ok(await op.dispatch(1));

      const waiting = ok(await op.record(1, envelopes.missingApproval(op.ref)));
      expect(waiting.state.status).toBe('awaiting_approval');
      expect(waiting.directive.next_action).toBe('request_approval');
      expect(refusal(await op.dispatch(2), 'APPROVAL_REQUIRED').state.status).toBe('awaiting_approval');

      const granted = ok(await op.approve('granted'));
      expect(granted.state.status).toBe('retry_ready');
      expect(granted.directive.next_action).toBe('dispatch');
      expect(ok(await op.dispatch(2)).state.status).toBe('dispatched');

      // The approval was used by that attempt; the tool asks again and this time it is denied.
      expect(ok(await op.record(2, envelopes.missingApproval(op.ref))).state.status).toBe('awaiting_approval');
      expect(refusal(await op.dispatch(3), 'APPROVAL_REQUIRED').state.status).toBe('awaiting_approval');
      const denied = ok(await op.approve('denied'));
      expect(denied.state).toMatchObject({ status: 'escalated', reason: 'APPROVAL_DENIED' });
      expect(refusal(await op.dispatch(3), 'STEP_ESCALATED').directive.next_action).toBe('none');

      const events = await op.events();
      expect(typesOf(events, 'AttemptDispatched')).toHaveLength(2);
      expect(refusalCodes(events)).toEqual(['APPROVAL_REQUIRED', 'APPROVAL_REQUIRED', 'STEP_ESCALATED']);
    });

    test('repeated provider outage: bounded dependency errors, then terminal escalation and ATTEMPTS_EXHAUSTED', async () => {
      const op = operation(api, uniqueRef('send_sms'));
      // Attempts would allow ten; the consecutive-outage bound (3) is what must stop the loop.
      ok(await op.plan({ policy: { max_attempts: 10, max_consecutive_dependency_failures: 3 } }));
      for (const attempt of [1, 2]) {
        ok(await op.dispatch(attempt));
        const scheduled = ok(await op.record(attempt, envelopes.outage(op.ref, new Date().toISOString())));
        expect(scheduled.state.status).toBe('retry_scheduled');
      }
      ok(await op.dispatch(3));
      const escalated = ok(await op.record(3, envelopes.outage(op.ref, new Date().toISOString())));
      expect(escalated.state).toMatchObject({ status: 'escalated', reason: 'DEPENDENCY_FAILURES_EXHAUSTED' });
      expect(escalated.directive).toEqual({ next_action: 'none', attempts_remaining: 0 });

      expect(refusal(await op.dispatch(4), 'ATTEMPTS_EXHAUSTED').state.status).toBe('escalated');
      expect(typesOf(await op.events(), 'AttemptDispatched')).toHaveLength(3);
    });
  });

  describe('bounds the table implies', () => {
    // BUG (src/domain/decide.ts attemptsRemaining / src/domain/step-state.ts evolve AttemptDispatched):
    // an envelope's max_attempts_remaining is never used up by the dispatch it allowed, so after a
    // "1 attempt remaining" envelope the corrected attempt still reports 1 remaining, and a later
    // verified not_found (the attempt's envelope was lost) opens a third attempt the tool never allowed.
    test("the envelope's remaining-attempt count is used up by the attempt it allowed", async () => {
      const op = operation(api, uniqueRef('send_email'));
      // A silent attempt may reach the provider until its call deadline, here the 1 s dispatch timeout
      // (docs/contract.md §4.5): the lost envelope's not_found is conclusive after it.
      ok(await op.plan({ policy: { max_attempts: 5, consistency_window_ms: 0, dispatch_timeout_ms: 1_000 } }));
      ok(await op.dispatch(1, INPUT_1));
      expect(ok(await op.record(1, envelopes.invalidRecipient(op.ref, 1))).directive.attempts_remaining).toBe(1);

      const corrected = ok(await op.dispatch(2, INPUT_2));
      expect(corrected.directive.attempts_remaining).toBe(0);
      // The worker lost attempt 2's envelope and verified: nothing committed, but nothing remains either.
      const verified = ok(
        await until(
          () => op.verify('not_found'),
          (answer) => answer.status !== 409,
          'the call deadline of attempt 2',
        ),
      );
      expect(verified.state.status).toBe('escalated');
      refusal(await op.dispatch(3, 'sha256:input-3'), 'ATTEMPTS_EXHAUSTED');
    });
  });

  describe('crash recovery and verification', () => {
    test('a worker killed after dispatch: after a server restart the operation is still in flight and is verified by the same ref', async () => {
      const own = await startLedger({ env: store.env() });
      let restarted: LedgerProcess | undefined;
      try {
        const before = ledgerAt(own.baseUrl);
        const committed = operation(before, uniqueRef('charge'));
        const lost = operation(before, uniqueRef('charge'));
        for (const op of [committed, lost]) {
          // A 1 s dispatch timeout: the dead worker's attempt may reach the provider until then (§4.5).
          ok(await op.plan({ policy: { consistency_window_ms: 0, dispatch_timeout_ms: 1_000 } }));
          ok(await op.dispatch(1));
        }
        // The crash: no envelope ever comes back for either attempt.
        await own.kill();
        restarted = await own.restart();
        const after = ledgerAt(restarted.baseUrl);

        for (const ref of [committed.ref, lost.ref]) {
          expect(ok(await after.state(ref))).toMatchObject({ status: 'dispatched', current_attempt: 1 });
        }
        // VerificationRecorded is accepted straight from `dispatched`.
        const found = ok(await operation(after, committed.ref).verify('found_committed', { evidence_ref: 'ch_1' }));
        expect(found.state).toMatchObject({ status: 'succeeded', success: { attempt: 1, proven_by: 'verification' } });
        const transitions = (await operation(after, committed.ref).events()).filter(
          (event) => event.type === 'TransitionRecorded',
        );
        expect(transitions[transitions.length - 1].data).toMatchObject({ from: 'dispatched', to: 'succeeded' });

        // Verified not committed: a new attempt of the same operation, numbered after the lost one.
        const lostAfter = operation(after, lost.ref);
        const conclusive = await until(
          () => lostAfter.verify('not_found'),
          (answer) => answer.status !== 409,
          'the call deadline of attempt 1',
        );
        expect(ok(conclusive).state.status).toBe('retry_ready');
        refusal(await lostAfter.dispatch(1), 'ATTEMPT_MISMATCH');
        expect(ok(await lostAfter.dispatch(2)).state).toMatchObject({ status: 'dispatched', current_attempt: 2 });
      } finally {
        await (restarted ?? own).kill();
        own.cleanup();
      }
    });

    test('lookup_unavailable escalates instead of guessing', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      ok(await op.dispatch(1));
      ok(await op.record(1, envelopes.outcomeUnknown(op.ref)));
      const escalated = ok(await op.verify('lookup_unavailable'));
      expect(escalated.state).toMatchObject({ status: 'escalated', reason: 'LOOKUP_UNAVAILABLE' });
      refusal(await op.dispatch(2), 'STEP_ESCALATED');
    });

    test('ATTEMPT_MISMATCH: the envelope of a stale attempt cannot land after its replacement was dispatched; it is kept as evidence', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan({ policy: { consistency_window_ms: 0 } }));
      ok(await op.dispatch(1));
      ok(await op.record(1, envelopes.outcomeUnknown(op.ref)));
      ok(await op.verify('not_found'));
      ok(await op.dispatch(2));

      const before = (await op.events()).length;
      const stale = refusal(await op.record(1, envelopes.success(op.ref)), 'ATTEMPT_MISMATCH');
      expect(stale.state).toMatchObject({
        status: 'dispatched',
        current_attempt: 2,
        possible_duplicate: { attempt: 1 },
      });
      // Recorded as evidence of what attempt 1 did (docs/contract.md §4.9), and nothing else.
      const after = await op.events();
      expect(after.slice(before).map((event) => [event.type, event.data.possible_duplicate])).toEqual([
        ['LateOutcomeRecorded', true],
      ]);
      expect(ok(await op.record(2, envelopes.success(op.ref))).state).toMatchObject({
        status: 'succeeded',
        success: { attempt: 2 },
      });
    });
  });

  describe('the stream as the source of truth', () => {
    test('OPERATION_REF_REUSED: the same ref planned with another definition; the same definition again is a no-op', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      const first = ok(await op.plan({ input_hash: INPUT_1 }));
      const same = ok(await op.plan({ input_hash: INPUT_1 }));
      expect(same.revision).toBe(first.revision);
      refusal(await op.plan({ input_hash: INPUT_2 }), 'OPERATION_REF_REUSED');
      refusal(await op.plan({ input_hash: INPUT_1, policy: { max_attempts: 9 } }), 'OPERATION_REF_REUSED');
      expect(await op.events()).toHaveLength(2);
    });

    test('STEP_NOT_PLANNED: any other fact before StepPlanned, and nothing is stored', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      refusal(await op.dispatch(1), 'STEP_NOT_PLANNED');
      refusal(await op.record(1, envelopes.outcomeUnknown(op.ref)), 'STEP_NOT_PLANNED');
      refusal(await op.verify('found_committed'), 'STEP_NOT_PLANNED');
      refusal(await op.approve('granted'), 'STEP_NOT_PLANNED');
      problem(await op.state(), 404, 'OPERATION_NOT_FOUND');
    });

    test('REVISION_CONFLICT: a stale expected_revision is refused and appends nothing', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      const planned = ok(await op.plan());
      expect(planned.revision).toBe(1);
      for (const stale of [-1, 0, 2]) {
        const body = problem(await op.dispatch(1, INPUT_1, undefined, stale), 409, 'REVISION_CONFLICT');
        expect(body.field).toBe('expected_revision');
      }
      expect(await op.events()).toHaveLength(2);
      expect(ok(await op.dispatch(1, INPUT_1, undefined, 1)).revision).toBe(3);
    });

    test('resubmitting an event_id appends nothing and answers as the first time, with status "duplicate" (also for a refusal)', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      const dispatchId = randomUUID();
      const first = ok(await op.dispatch(1, INPUT_1, dispatchId));
      ok(await op.record(1, envelopes.outcomeUnknown(op.ref)));
      const refusedId = randomUUID();
      const firstRefusal = refusal(await op.dispatch(2, INPUT_1, refusedId), 'VERIFY_BEFORE_RETRY');
      ok(await op.verify('found_committed', { evidence_ref: 'inv_1' }));
      const stored = (await op.events()).length;

      // The step has moved on to succeeded; the resubmission still gets the first answer.
      const again = ok(await op.dispatch(1, INPUT_1, dispatchId));
      expect(again.revision).toBe(first.revision);
      expect(again.state).toEqual(first.state);
      expect(again.directive).toEqual(first.directive);
      expect(again.results).toEqual([{ event_id: dispatchId, status: 'duplicate' }]);

      const refusedAgain = refusal(await op.dispatch(2, INPUT_1, refusedId), 'VERIFY_BEFORE_RETRY');
      expect(refusedAgain.directive).toEqual(firstRefusal.directive);
      expect(refusedAgain.results).toEqual([{ event_id: refusedId, status: 'duplicate' }]);
      expect(await op.events()).toHaveLength(stored);
    });

    test('EVENT_ID_REUSED: the same event_id with other data is refused and appends nothing', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      const id = randomUUID();
      ok(await op.dispatch(1, INPUT_1, id));
      const body = problem(await op.dispatch(1, INPUT_2, id), 409, 'EVENT_ID_REUSED');
      expect(body.field).toBe('events[0].event_id');
      expect(await op.events()).toHaveLength(4);
    });

    test('a ref with "/" (and other reserved characters) percent-encoded as one segment round-trips', async () => {
      const ref = `run_${randomUUID().slice(0, 8)}/step 4?x=1#frag%2F é`;
      const op = operation(api, ref);
      expect(ok(await op.plan()).state.operation_ref).toBe(ref);
      ok(await op.dispatch(1));
      // The envelope names the decoded ref: accepted only if the path was decoded to exactly that.
      expect(ok(await op.record(1, envelopes.success(ref))).state.status).toBe('succeeded');
      expect(ok(await op.state())).toMatchObject({ operation_ref: ref, status: 'succeeded' });
      expect(ok(await api.events(ref)).operation_ref).toBe(ref);
      // An unencoded slash is another path, not this operation.
      expect((await request(ledger.baseUrl, 'GET', `/v1/operations/${ref.split('/')[0]}/step%204`)).status).toBe(404);
    });

    test('an operation_ref of the documented maximum length (200 characters) works', async () => {
      // operation-ref.ts and the envelope limits allow 200 characters; the HTTP layer must too.
      const ref = `run_${'x'.repeat(196)}`;
      const answer = await operation(api, ref).plan();
      expect({ status: answer.status, ref: answer.body?.state?.operation_ref }).toEqual({ status: 200, ref });
    });

    test('GET /events?as_of_revision=N answers the state folded up to N', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      ok(await op.dispatch(1));
      ok(await op.record(1, envelopes.outcomeUnknown(op.ref)));
      ok(await op.verify('found_committed', { evidence_ref: 'inv_9' }));
      const expected: Array<[number, string]> = [
        [1, 'planned'],
        [3, 'dispatched'],
        [5, 'verifying'],
        [7, 'succeeded'],
      ];
      for (const [revision, status] of expected) {
        const body = ok(await api.events(op.ref, `?as_of_revision=${revision}`));
        expect(body.as_of_revision).toBe(revision);
        expect(body.state).toMatchObject({ status, revision });
        expect(body.events).toHaveLength(8);
      }
      // Between a fact and its transition: the fact is folded, the status has not changed yet.
      expect(ok(await api.events(op.ref, '?as_of_revision=2')).state).toMatchObject({
        status: 'planned',
        attempts_used: 1,
      });
      expect(problem(await api.events(op.ref, '?as_of_revision=x'), 400, 'BAD_REQUEST').field).toBe('as_of_revision');
    });
  });

  describe('secrets and the schema', () => {
    const BEARER = 'Bearer abcDEF1234567890ghiJKL';
    const STRIPE = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
    const JWT =
      'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
    const PEM =
      '-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEAq7BFUpkGp3\n-----END PRIVATE KEY-----';
    const CARD = '4111 1111 1111 1111';
    const secretFragments = [
      'abcDEF1234567890ghiJKL',
      STRIPE,
      JWT.split('.')[2],
      'MIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEAq7BFUpkGp3',
      CARD,
      CARD.replace(/ /g, ''),
    ];

    test('secrets in an envelope never reach a response or the events table, and the redaction is recorded', async () => {
      const op = operation(api, uniqueRef('create_invoice'));
      ok(await op.plan());
      ok(await op.dispatch(1));
      const envelope = {
        ...envelopes.outcomeUnknown(op.ref),
        agent_message: `Upstream said: Authorization: ${BEARER}; key ${STRIPE}; ${PEM}`,
        user_message: `session ${JWT} for card ${CARD}`,
      };
      const id = randomUUID();
      const answers = [await op.record(1, envelope, id)];
      // The same submission again is recognised as a resubmission, not as a reused id.
      answers.push(await op.record(1, envelope, id));
      expect(ok(answers[1]).results).toEqual([{ event_id: id, status: 'duplicate' }]);
      answers.push(
        await op.verify('found_committed', {
          evidence_ref: 'inv_5',
          result: { note: `paid with ${CARD}, key ${STRIPE}` },
        }),
      );
      answers.push(await op.state(), await api.events(op.ref), await api.events(op.ref, '?as_of_revision=5'));
      for (const answer of answers) ok(answer);

      const seen = [...answers.map((answer) => JSON.stringify(answer.body)), await store.dumpLog(ledger)];
      for (const text of seen) for (const secret of secretFragments) expect(text).not.toContain(secret);

      const recorded = (await op.events()).find((event) => event.type === 'EnvelopeRecorded');
      const kinds = recorded?.data.redactions.map((redaction: { kind: string }) => redaction.kind).sort();
      // The Stripe key is found by the shapes known here: secretlint 12 (the last release whose engines
      // include Node 20) has no Stripe rule.
      expect(kinds).toEqual(expect.arrayContaining(['api_key', 'bearer_token', 'card_number', 'jwt', 'private_key']));
      expect(recorded?.data.envelope.agent_message).toContain('[REDACTED:');
      const verification = (await op.events()).find((event) => event.type === 'VerificationRecorded');
      expect(verification?.data.redactions.map((redaction: { kind: string }) => redaction.kind)).toEqual(
        expect.arrayContaining(['card_number', 'api_key']),
      );
      // The secret-free log is really the one written: the check above read the events this test wrote.
      expect((await store.log(ledger)).some((event) => event.event_id === id)).toBe(true);
    });

    test('GET /v1/schema/envelope serves a JSON Schema that accepts the contract envelopes and rejects broken ones', async () => {
      const answer = await request(ledger.baseUrl, 'GET', '/v1/schema/envelope');
      expect(answer.status).toBe(200);
      expect(answer.contentType).toMatch(/^application\/schema\+json/);
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      addFormats(ajv);
      const validate = ajv.compile(answer.body);
      const ref = 'run_81/step_4';
      for (const envelope of [
        envelopes.success(ref),
        envelopes.invalidRecipient(ref),
        envelopes.outcomeUnknown(ref),
        envelopes.missingApproval(ref),
      ]) {
        expect({
          envelope: envelope.ok ? 'success' : (envelope as { code: string }).code,
          valid: validate(envelope),
        }).toEqual(expect.objectContaining({ valid: true }));
      }
      const broken = [
        { ...envelopes.outcomeUnknown(ref), code: 'outcome unknown' },
        { ...envelopes.outcomeUnknown(ref), commit_state: 'committed' },
        { ...envelopes.invalidRecipient(ref), safe_details: { password: 'x' } },
        { ...envelopes.success(ref), commit_state: 'unknown' },
        { ok: false, code: 'X' },
      ];
      for (const envelope of broken) expect(validate(envelope)).toBe(false);
    });
  });

  return { instances: () => (other ? [ledger, other] : [ledger]) };
}

describe('the contract table on SQLite', () => {
  contractTable(sqliteStore());
});

describe('the contract table on EventStoreDB', () => {
  /**
   * The contract table (docs/contract.md §4) and the stream-as-source-of-truth rows (contractTable above), run
   * unchanged against the built service started with LEDGER_STORE=eventstoredb on the EventStoreDB
   * protocol double (test/support/eventstoredb-protocol-double): the same HTTP scenarios as on SQLite.
   * Only the store differs; the rows that check "nothing was stored" read `$all` through the port.
   */
  const onTheDouble = eventStoreDbStore();
  contractTable(onTheDouble);

  describe('the store under the rows above', () => {
    test('was the protocol double: the service appended and read over gRPC, and every stream is one operation', async () => {
      const { double, store } = onTheDouble;
      expect(double.callCounts.Append).toBeGreaterThan(50);
      expect(double.callCounts.Read).toBeGreaterThan(50);
      // The projection engine follows the log with a subscription to $all.
      expect(double.callCounts.Subscribe).toBeGreaterThan(0);
      const log = await store.readAll({ after: 0, limit: 100_000 });
      expect(log.length).toBeGreaterThan(100);
      expect(log.every((event) => event.stream.startsWith('op-default:'))).toBe(true);
    });
  });
});

describeWithPostgres('the contract table on PostgreSQL, across two instances', (database) => {
  /**
   * The contract table (docs/contract.md §4) and the rows after it, run unchanged against two built
   * instances started with LEDGER_STORE=postgres on one database of this file's own
   * (test/support/postgres.ts): facts go to the two in turn and reads to the other one (inTurn
   * above), so each decision is taken on what the other instance appended. The rows that check
   * "nothing was stored" read `ledger_events` on a connection of the test's own.
   */
  const onPostgres = postgresStore(database);
  const table = contractTable(onPostgres, { instances: 2 });

  describe('the store under the rows above', () => {
    test('was PostgreSQL, shared: every operation stream is in ledger_events, whole and chained; one instance projects, the other copies; neither kept an events file', async () => {
      const log = await onPostgres.log({ dataDir: '' });
      expect(log.length).toBeGreaterThan(100);
      expect(log.every((event) => event.stream.startsWith('op-default:'))).toBe(true);
      const streams = new Map<string, StoredEvent[]>();
      for (const event of log) streams.set(event.stream, [...(streams.get(event.stream) ?? []), event]);
      for (const events of streams.values()) {
        expect(events.map((event) => event.revision)).toEqual(events.map((_, index) => index));
        expect(verifyChain(events)).toBeUndefined();
      }
      const instances = table.instances();
      expect(instances).toHaveLength(2);
      const roles = await Promise.all(
        instances.map(async (instance) => {
          expect(existsSync(join(instance.dataDir, 'events.sqlite'))).toBe(false);
          return ok(await request(instance.baseUrl, 'GET', '/health/ready')).details.projections.read_models;
        }),
      );
      expect(roles.sort()).toEqual(['copy', 'projector']);
    });
  });
});

describe('readiness and lag on EventStoreDB', () => {
  /**
   * Readiness and /metrics of the built service on EventStoreDB (the protocol double, whose positions
   * are `$all` commit positions: byte offsets, as on a real server). `events_behind` is a count of
   * events or nothing, never a difference of two positions: once the projections have applied every
   * operation event it is 0, even when $all has moved on with records no projection reads (the work
   * feed's lease streams).
   */
  const store = eventStoreDbStore();
  let ledger: LedgerProcess;

  beforeAll(async () => {
    await store.start();
    ledger = await startLedger({ env: store.env() });
  });

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
    await store.stop();
  });

  test('readiness and the lag metric count events, not positions, once the projections have caught up', async () => {
    const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
    const planned = await ledgerAt(ledger.baseUrl).submit(ref, [
      fact('StepPlanned', { run_id: 'run_lag', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
    ]);
    expect(planned.status).toBe(200);
    const position = planned.body.position as number;

    // Another application's event lands after it: $all's head moves past the projections' checkpoint.
    // (The lease and clock streams the adapter keeps are passed over by every read of the log, the head's too.)
    await store.store.append(`elsewhere-${randomUUID()}`, NO_STREAM, [newEvent('SomethingElse')]);
    expect(await store.store.headPosition()).toBeGreaterThan(position);

    // Counted as caught up once every projection has applied the plan; a difference of positions never would be.
    const ready = await until(
      () => request(ledger.baseUrl, 'GET', '/health/ready'),
      (answer) => answer.status === 200 && answer.body.details.projections.events_behind === 0,
      'the projections to be reported caught up',
    );
    expect(ready.body.details.projections).toMatchObject({ status: 'up', state: 'live', lag_ms: 0, events_behind: 0 });

    const metrics = await request(ledger.baseUrl, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    const lagEvents = [...String(metrics.body).matchAll(/^ledger_projection_lag_events\{[^}]*\} (\S+)$/gm)].map(
      (match) => Number(match[1]),
    );
    expect(lagEvents.length).toBeGreaterThan(0);
    expect(lagEvents.every((value) => value === 0)).toBe(true);
  });

  test('`projections rebuild --url` on this store ends once the projections have caught up, lease records after them or not', async () => {
    await store.store.append(`lease-${randomUUID()}`, NO_STREAM, [newEvent('LeaseChanged')]);
    // Asynchronous: the double this service writes to runs in this process and must keep answering.
    const cli = startCli(['projections', 'rebuild', '--progress', 'never', '--url', ledger.baseUrl]);
    const timer = setTimeout(() => cli.child.kill(), 30_000);
    const code = await cli.exited;
    clearTimeout(timer);
    expect({ code, stderr: cli.stderr() }).toEqual({ code: 0, stderr: '' });
    expect(cli.stdout()).toMatch(
      new RegExp(`^rebuilt step_state, evidence_trail, run_summary, trust_metrics on ${ledger.baseUrl} in `),
    );
  });
});

describe('two instances on one EventStoreDB', () => {
  /**
   * Two service instances on one EventStoreDB (the protocol double), each with its own data
   * directory and so its own read models (`read-models.sqlite`, a cache of the log): both serve
   * correct reads of what either wrote, and racing dispatches spread across them are decided at the
   * revision they read, so exactly one of 20 is granted (docs/contract.md §4, §6).
   */
  const TENANT = 'default'; // local mode
  const store = eventStoreDbStore();
  let a: LedgerProcess;
  let b: LedgerProcess;
  let apiA: Ledger;
  let apiB: Ledger;

  beforeAll(async () => {
    await store.start();
    [a, b] = await Promise.all([startLedger({ env: store.env() }), startLedger({ env: store.env() })]);
    apiA = ledgerAt(a.baseUrl);
    apiB = ledgerAt(b.baseUrl);
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    a?.cleanup();
    b?.cleanup();
    await store.stop();
  });

  /** A GET on both instances, asked to wait until `position` is projected; answers both bodies. */
  async function onBoth(path: string, position: number): Promise<[any, any]> {
    const separator = path.includes('?') ? '&' : '?';
    const answers = await Promise.all(
      [a, b].map((ledger) =>
        request(ledger.baseUrl, 'GET', `${path}${separator}wait_timeout_ms=20000&wait_for_position=${position}`),
      ),
    );
    return [ok(answers[0]), ok(answers[1])];
  }

  /** The stream as the log holds it, read through the port (not through either service). */
  async function streamOf(ref: string): Promise<StoredEvent[]> {
    return store.store.readStream(operationStream(TENANT, ref));
  }

  function expectWhole(events: StoredEvent[]): void {
    expect(events.map((event) => event.revision)).toEqual(events.map((_, index) => index));
    expect(verifyChain(events)).toBeUndefined();
  }

  const uniqueRun = () => `run_${randomUUID().slice(0, 8)}`;
  const uniqueTool = () => `tool_${randomUUID().slice(0, 8)}`;

  describe('two service instances on one EventStoreDB', () => {
    test('each keeps its own read models and no events file: the log is the server', () => {
      for (const ledger of [a, b]) {
        expect(existsSync(join(ledger.dataDir, 'read-models.sqlite'))).toBe(true);
        expect(existsSync(join(ledger.dataDir, 'events.sqlite'))).toBe(false);
      }
      expect(a.dataDir).not.toBe(b.dataDir);
    });

    test('20 dispatches racing across both: exactly one 200, nineteen typed ATTEMPT_IN_FLIGHT, one AttemptDispatched', async () => {
      const tool = uniqueTool();
      const ref = `${uniqueRun()}/charge`;
      ok(await operation(apiA, ref).plan({ tool }));
      const ops = [operation(apiA, ref), operation(apiB, ref)];
      const answers = await Promise.all(Array.from({ length: 20 }, (_, index) => ops[index % 2].dispatch(1)));

      expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
      const refused = answers.filter((answer) => answer.status !== 200);
      expect(refused).toHaveLength(19);
      for (const answer of refused) refusal(answer, 'ATTEMPT_IN_FLIGHT');

      const log = await streamOf(ref);
      expectWhole(log);
      expect(log.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
      expect(log.filter((event) => event.type === 'DispatchRefused').map((event) => event.data.code)).toEqual(
        Array(19).fill('ATTEMPT_IN_FLIGHT'),
      );
      // Both instances read the stream from the server, strongly consistent, the same as the log.
      for (const op of ops) {
        expect((await op.events()).map((event) => event.event_id)).toEqual(log.map((event) => event.event_id));
        expect(ok(await op.state())).toMatchObject({
          status: 'dispatched',
          current_attempt: 1,
          revision: log.length - 1,
        });
      }

      // And each instance's own projections saw all of it, whichever instance wrote it.
      const last = log[log.length - 1].position;
      const [evidenceA, evidenceB] = await onBoth(`${opPath(ref)}/evidence`, last);
      expect(evidenceA).toEqual(evidenceB);
      expect(evidenceA.entries.map((entry: { kind: string }) => entry.kind)).toEqual([
        'plan',
        'transition',
        'attempt',
        'transition',
        ...Array(19).fill('refusal'),
      ]);
      expect(evidenceA.entries.map((entry: { event_id: string }) => entry.event_id)).toEqual(
        log.map((event) => event.event_id),
      );
      const [trustA, trustB] = await onBoth(`/v1/metrics/trust?tool=${tool}`, last);
      expect(trustA).toEqual(trustB);
      expect(trustA.tools).toEqual([
        expect.objectContaining({
          tool,
          operations_planned: 1,
          unverified_dispatches_refused: 19,
          dispatch_refusals: { ATTEMPT_IN_FLIGHT: 19 },
        }),
      ]);
    });

    test('20 dispatches at one expected_revision across both: one 200, nineteen REVISION_CONFLICT, nothing else stored', async () => {
      const ref = `${uniqueRun()}/charge`;
      const planned = ok(await operation(apiB, ref).plan());
      const ops = [operation(apiA, ref), operation(apiB, ref)];
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, index) => ops[index % 2].dispatch(1, undefined, randomUUID(), planned.revision)),
      );
      expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
      for (const answer of answers.filter((other) => other.status !== 200)) problem(answer, 409, 'REVISION_CONFLICT');
      const log = await streamOf(ref);
      expectWhole(log);
      expect(log.map((event) => event.type)).toEqual([
        'StepPlanned',
        'TransitionRecorded',
        'AttemptDispatched',
        'TransitionRecorded',
      ]);
    });

    test('a run driven through both instances, fact by fact alternately, reads the same and right on each', async () => {
      const run = uniqueRun();
      const tool = uniqueTool();
      const apis = [apiA, apiB];
      let turn = 0;
      const next = () => apis[turn++ % 2];
      const refs = [`${run}/step_1`, `${run}/step_2`, `${run}/step_3`];
      let last: number;
      const step = async (ref: string, act: (op: ReturnType<typeof operation>) => Promise<HttpAnswer>) => {
        last = ok(await act(operation(next(), ref))).position;
      };
      for (const ref of refs) await step(ref, (op) => op.plan({ tool, policy: { consistency_window_ms: 0 } }));
      // step_1 succeeds; step_2's outcome is unknown and is verified committed; step_3 stays in flight.
      await step(refs[0], (op) => op.dispatch(1));
      await step(refs[0], (op) => op.record(1, envelopes.success(refs[0])));
      await step(refs[1], (op) => op.dispatch(1));
      await step(refs[1], (op) => op.record(1, envelopes.outcomeUnknown(refs[1])));
      await step(refs[2], (op) => op.dispatch(1));
      // A dispatch on the succeeded step, on the other instance: the original success replayed.
      const replay = ok(await operation(next(), refs[0]).dispatch(2));
      expect(replay).toMatchObject({ replayed: true, success: { attempt: 1, proven_by: 'envelope' } });
      last = replay.position;

      const [runA, runB] = await onBoth(`/v1/runs/${run}`, last);
      expect(runA).toEqual(runB);
      expect(runA).toMatchObject({
        run_id: run,
        total: 3,
        open: 2,
        counts: { succeeded: 1, verifying: 1, dispatched: 1 },
      });
      expect(
        runA.steps.map((entry: { operation_ref: string; status: string }) => [entry.operation_ref, entry.status]),
      ).toEqual([
        [refs[0], 'succeeded'],
        [refs[1], 'verifying'],
        [refs[2], 'dispatched'],
      ]);

      const [recoveryA, recoveryB] = await onBoth(`/v1/recovery?tool=${tool}`, last);
      expect(recoveryA).toEqual(recoveryB);
      expect(
        recoveryA.items.map((item: { operation_ref: string; status: string }) => [item.operation_ref, item.status]),
      ).toEqual([
        [refs[1], 'verifying'],
        [refs[2], 'dispatched'],
      ]);

      for (const ref of refs) {
        const [evidenceA, evidenceB] = await onBoth(`${opPath(ref)}/evidence`, last);
        expect(evidenceA).toEqual(evidenceB);
        expect(evidenceA.entries.map((entry: { event_id: string }) => entry.event_id)).toEqual(
          (await streamOf(ref)).map((event) => event.event_id),
        );
      }

      // The verification lands through the instance that did not record the unknown outcome.
      const verified = ok(await operation(apiA, refs[1]).verify('found_committed', { evidence_ref: 'inv_2' }));
      expect(verified.state).toMatchObject({ status: 'succeeded', reason: 'VERIFIED_COMMITTED' });
      const [trustA, trustB] = await onBoth(`/v1/metrics/trust?tool=${tool}`, verified.position);
      expect(trustA).toEqual(trustB);
      expect(trustA.tools).toEqual([
        expect.objectContaining({
          tool,
          operations_planned: 3,
          succeeded: 2,
          unknown_outcomes: 1,
          verified_found_committed: 1,
          duplicate_writes_prevented: 1,
          pending_recovery_now: 0,
        }),
      ]);
      const [afterA, afterB] = await onBoth(`/v1/recovery?tool=${tool}`, verified.position);
      expect(afterA.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([refs[2]]);
      expect(afterB.items).toEqual(afterA.items);
    });
  });
});
