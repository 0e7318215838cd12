/**
 * The request bodies of the HTTP figures, shared by the load process (which sends them) and the
 * in-process figures (which need the same payloads, e.g. the raw-insert baseline of figure 3).
 * Every body is a real, legal submit of docs/contract.md §9: the ledger accepts it and stores what it causes.
 */
import { createHash } from 'node:crypto';

export type Scenario =
  /** Figure 1: one StepPlanned per request, each on a new operation. */
  | { kind: 'plan'; label: string }
  /** Figure 2: one AttemptDispatched per request on operations planned by a `plan` run (0..count-1). */
  | { kind: 'dispatch'; label: string; count: number }
  /** Figure 3: 100 facts per request on a new operation (see batchFacts). */
  | { kind: 'batch'; label: string; size: number }
  /** Figure 6: the same GET, over and over. */
  | { kind: 'get'; path: string };

export const INPUT_HASH = 'sha256:9f2c1e4b7a60d3a85c1f0e2b4d6a8c0e1f3a5b7d9c2e4f6a8b0c1d3e5f7a9b1c';
const TOOLS = ['create_invoice', 'send_email', 'create_ticket', 'deploy_service', 'update_record', 'charge_card'];

/** A deterministic RFC 4122 v4-shaped id: the n-th event of a run, the same in every process. */
export function benchUuid(label: string, n: number, k = 0): string {
  const hex = createHash('sha1').update(`${label}:${n}:${k}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export const operationRef = (label: string, n: number) => `${label}/op_${n}`;
export const submitPath = (ref: string) => `/v1/operations/${encodeURIComponent(ref)}/events`;

export function planFact(label: string, n: number) {
  return {
    event_id: benchUuid(label, n),
    type: 'StepPlanned',
    data: {
      run_id: `${label}_run_${Math.floor(n / 8)}`,
      tool: TOOLS[n % TOOLS.length],
      side_effect: 'write',
      input_hash: INPUT_HASH,
    },
  };
}

export function dispatchFact(label: string, n: number, attempt = 1, k = 1) {
  return { event_id: benchUuid(label, n, k), type: 'AttemptDispatched', data: { attempt, input_hash: INPUT_HASH } };
}

/**
 * `size` facts for one operation, all legal in one submit: plan, dispatch, the committed envelope,
 * then dispatches on the succeeded step, each answered with the original success and recorded as
 * a prevented duplicate write (docs/contract.md §4.7). A runtime replaying a backlog sends exactly this.
 */
export function batchFacts(label: string, n: number, size: number) {
  const ref = operationRef(label, n);
  const checkedAt = '2026-01-01T00:00:00.000Z';
  const facts: Array<{ event_id: string; type: string; data: Record<string, unknown> }> = [
    planFact(label, n),
    dispatchFact(label, n),
  ];
  facts.push({
    event_id: benchUuid(label, n, 2),
    type: 'EnvelopeRecorded',
    data: {
      attempt: 1,
      envelope: {
        ok: true,
        operation_ref: ref,
        commit_state: 'committed',
        result: { id: `inv_${n}` },
        verification: { checked_at: checkedAt, evidence_ref: `ev_${n}` },
      },
    },
  });
  for (let k = 3; facts.length < size; k++) facts.push(dispatchFact(label, n, 1, k));
  return facts.slice(0, size);
}

/** The method, path and body of request n of a scenario. */
export function requestOf(scenario: Scenario, n: number): { method: 'GET' | 'POST'; path: string; body?: string } {
  switch (scenario.kind) {
    case 'plan':
      return {
        method: 'POST',
        path: submitPath(operationRef(scenario.label, n)),
        body: JSON.stringify({ events: [planFact(scenario.label, n)] }),
      };
    case 'dispatch': {
      // Past `count` the dispatches repeat on operations already in flight: the ledger refuses them
      // (ATTEMPT_IN_FLIGHT, recorded); the load process counts them apart from the 2xx.
      const op = n % scenario.count;
      const round = Math.floor(n / scenario.count);
      return {
        method: 'POST',
        path: submitPath(operationRef(scenario.label, op)),
        body: JSON.stringify({ events: [dispatchFact(scenario.label, op, 1, 1 + round)] }),
      };
    }
    case 'batch':
      return {
        method: 'POST',
        path: submitPath(operationRef(scenario.label, n)),
        body: JSON.stringify({ events: batchFacts(scenario.label, n, scenario.size) }),
      };
    case 'get':
      return { method: 'GET', path: scenario.path };
  }
}
