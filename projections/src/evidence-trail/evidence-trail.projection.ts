import {
  countDispatch,
  isTerminalStatus,
  mayHaveReachedProvider,
  NO_ATTEMPTS,
  type StepStatus,
  type VerificationOutcome,
} from '@recovery-ledger/core';
import { asLedgerEvent } from '../ledger-events';
import {
  alreadyApplied,
  isRecord,
  scopedKey,
  stringField,
  textOf,
  type LeaseEvidence,
  type ProjectedEvent,
  type Projection,
} from '../projection';

/**
 * The evidence trail (docs/contract.md §5): per operation, every attempt, envelope, refusal, verification,
 * approval and transition in log order, and a verdict saying the final state and how it was
 * proven. It is what an auditor reads to answer "what happened to run_81/step_4, and how do we
 * know?". Entries are only ever appended, so the trail of a prefix of the log is a prefix of the
 * trail of the whole (a property test holds it to that).
 */
export type EvidenceKind =
  'plan' | 'attempt' | 'envelope' | 'refusal' | 'verification' | 'approval' | 'operator' | 'transition' | 'other';

export interface EvidenceEntry {
  revision: number;
  position: number;
  event_id: string;
  type: string;
  kind: EvidenceKind;
  recorded_at: string;
  actor: string;
  /** For what the ledger derived: the submitted fact that caused it. */
  caused_by?: string;
  /**
   * For a fact a worker submitted under a work-feed lease: who it was, and whose lease it took over.
   * Not the lease id: while the lease lives it is its holder's capability (docs/work-feed.md).
   */
  worker?: Omit<LeaseEvidence, 'lease_id'>;
  /** One line for a person reading the trail. */
  summary: string;
  /** The event's data as stored (secrets were redacted before anything was stored). */
  data: unknown;
}

export type ProvenCommitState = 'committed' | 'not_committed' | 'unknown';

export interface Verdict {
  status: StepStatus | 'unplanned';
  terminal: boolean;
  /** What the evidence proves about the side effect, as far as it goes. */
  commit_state: ProvenCommitState;
  /**
   * How the commit state is known: the tool's envelope, a lookup by operation_ref, a person's
   * lookup (OutcomeVerifiedManually, docs/contract.md §4.10), or nothing yet.
   */
  proven_by: 'envelope' | 'verification' | 'manual_verification' | 'none';
  /** The trail entry that proves it. */
  proof_event_id?: string;
  attempt?: number;
  verification_tool?: string;
  evidence_ref?: string;
  reason: string;
  duplicates_prevented: number;
  /** e.g. "committed — verified via get_invoice_by_operation_ref, evidence inv_123". */
  statement: string;
}

interface EnvelopeFact {
  attempt: number;
  event_id: string;
  ok: boolean;
  code: string;
  commit_state: string;
  next_action?: string;
  evidence_ref?: string;
  verification_tool?: string;
  field?: string;
}

interface VerificationFact {
  event_id: string;
  outcome: VerificationOutcome;
  evidence_ref?: string;
  attempt: number;
  /** A person's lookup: the key id that recorded it. */
  operator?: string;
}

export interface EvidenceTrailDoc {
  tenant: string;
  operation_ref: string;
  run_id?: string;
  tool?: string;
  side_effect?: string;
  verification_tool?: string;
  max_attempts?: number;
  status: StepStatus | 'unplanned';
  reason: string;
  not_before?: string;
  attempts_used: number;
  current_attempt: number;
  last_envelope?: EnvelopeFact;
  last_verification?: VerificationFact;
  approval?: { decision: string; approver: string; event_id: string };
  /** The last operator action (cancel, reopen, acknowledge), by key id, with its reason or note. */
  operator_action?: { type: string; actor: string; reason?: string; event_id: string };
  duplicates_prevented: number;
  /**
   * An outcome that may have reached the provider, reported by an attempt after a later one was
   * granted (docs/contract.md §4.9).
   */
  possible_duplicate?: { attempt: number; event_id: string };
  entries: EvidenceEntry[];
  verdict: Verdict;
  revision: number;
  position: number;
}

/**
 * What the ledger answers of an operation's evidence (docs/contract.md §5): the trail's public
 * fields without its working state. The service pages `entries`; the CLI reports them whole.
 */
export interface EvidenceReport {
  operation_ref: string;
  run_id?: string;
  tool?: string;
  side_effect?: string;
  status: string;
  revision: number;
  verdict: Verdict;
  /**
   * An outcome that may have reached the provider, reported by an attempt after a later one was
   * granted (docs/contract.md §4.9).
   */
  possible_duplicate?: { attempt: number; event_id: string };
  entries: EvidenceEntry[];
}

export function evidenceReport(doc: EvidenceTrailDoc, entries: EvidenceEntry[] = doc.entries): EvidenceReport {
  return {
    operation_ref: doc.operation_ref,
    ...(doc.run_id === undefined ? {} : { run_id: doc.run_id }),
    ...(doc.tool === undefined ? {} : { tool: doc.tool }),
    ...(doc.side_effect === undefined ? {} : { side_effect: doc.side_effect }),
    status: doc.status,
    revision: doc.revision,
    verdict: doc.verdict,
    ...(doc.possible_duplicate ? { possible_duplicate: doc.possible_duplicate } : {}),
    entries,
  };
}

/** What a verdict is derived from: the whole document but its verdict. */
type TrailFacts = Omit<EvidenceTrailDoc, 'verdict'>;

function emptyDoc(event: ProjectedEvent): EvidenceTrailDoc {
  const facts: TrailFacts = {
    tenant: event.metadata.tenant,
    operation_ref: event.metadata.operation_ref,
    status: 'unplanned',
    reason: 'UNPLANNED',
    ...NO_ATTEMPTS,
    duplicates_prevented: 0,
    entries: [],
    revision: -1,
    position: 0,
  };
  const { revision, position, ...rest } = facts;
  // The verdict stands where stored documents have always had it, before revision and position.
  return { ...rest, verdict: verdictOf(facts), revision, position };
}

/** A template for entry and verdict text: each value through textOf, so event data never throws. */
const line = (strings: TemplateStringsArray, ...values: unknown[]): string =>
  strings.reduce((text, part, index) => text + textOf(values[index - 1]) + part);

function entryFor(event: ProjectedEvent, kind: EvidenceKind, summary: string): EvidenceEntry {
  return {
    revision: event.revision,
    position: event.position,
    event_id: event.event_id,
    type: event.type,
    kind,
    recorded_at: event.metadata.recorded_at,
    actor: event.metadata.actor,
    ...(event.metadata.causation_event_id ? { caused_by: event.metadata.causation_event_id } : {}),
    ...(event.metadata.lease ? { worker: workerOf(event.metadata.lease) } : {}),
    summary,
    data: event.data,
  };
}

function workerOf({ lease_id: _leaseId, ...worker }: LeaseEvidence): Omit<LeaseEvidence, 'lease_id'> {
  return worker;
}

/** The verification tool for an unknown outcome: the step's policy, else what the envelope named. */
function verificationToolOf(doc: TrailFacts): string | undefined {
  return doc.verification_tool ?? doc.last_envelope?.verification_tool;
}

function via(tool: string | undefined): string {
  return tool ? line`via ${tool}` : 'by a lookup of the operation_ref';
}

function evidence(ref: string | undefined): string {
  return ref ? line`, evidence ${ref}` : '';
}

function duplicates(count: number): string {
  if (count === 0) return '';
  return count === 1 ? '; 1 duplicate write prevented' : line`; ${count} duplicate writes prevented`;
}

/** The best-proven commit state of the last attempt, when the step did not succeed. */
function uncommittedProof(doc: TrailFacts): Pick<Verdict, 'commit_state' | 'proven_by' | 'proof_event_id' | 'attempt'> {
  const envelope = doc.last_envelope;
  const verification = doc.last_verification;
  // A verification is later evidence than the envelope it resolves, for the same attempt.
  if (
    verification &&
    verification.attempt === doc.current_attempt &&
    (!envelope || envelope.attempt <= verification.attempt)
  ) {
    const state: ProvenCommitState = verification.outcome === 'not_found' ? 'not_committed' : 'unknown';
    return {
      commit_state: state,
      proven_by: verification.operator ? 'manual_verification' : 'verification',
      proof_event_id: verification.event_id,
      attempt: verification.attempt,
    };
  }
  if (envelope && envelope.attempt === doc.current_attempt) {
    const state: ProvenCommitState = envelope.commit_state === 'not_committed' ? 'not_committed' : 'unknown';
    return { commit_state: state, proven_by: 'envelope', proof_event_id: envelope.event_id, attempt: envelope.attempt };
  }
  if (doc.current_attempt === 0) return { commit_state: 'not_committed', proven_by: 'none' };
  // An attempt was dispatched and nothing came back for it yet.
  return { commit_state: 'unknown', proven_by: 'none', attempt: doc.current_attempt };
}

function pendingStatement(doc: TrailFacts): string {
  const attempt = line`attempt ${doc.current_attempt}`;
  switch (doc.status) {
    case 'unplanned':
      return 'unplanned — no StepPlanned recorded';
    case 'planned':
      return 'pending — planned, no attempt dispatched yet';
    case 'dispatched':
      return line`pending — ${attempt} in flight, no outcome recorded yet`;
    case 'verifying':
      return line`pending — the outcome of ${attempt} is unknown (${doc.last_envelope?.code ?? doc.reason}); verify ${via(verificationToolOf(doc))} before any new write`;
    case 'needs_input': {
      const field = doc.last_envelope?.field ? line` (field ${doc.last_envelope.field})` : '';
      return line`pending — not committed; needs corrected input after ${doc.reason}${field}`;
    }
    case 'retry_scheduled':
      return line`pending — not committed; retry scheduled${doc.not_before ? line` not before ${doc.not_before}` : ''} after ${doc.reason}`;
    case 'awaiting_approval':
      return line`pending — not committed; awaiting approval (${doc.reason})`;
    case 'retry_ready':
      return doc.reason === 'VERIFIED_NOT_FOUND'
        ? line`pending — ${attempt} verified not committed ${via(verificationToolOf(doc))}; a new attempt with the same operation_ref may run`
        : line`pending — a new attempt may run (${doc.reason})`;
    default:
      return line`pending — ${doc.status}`;
  }
}

function escalationStatement(doc: TrailFacts, proof: ReturnType<typeof uncommittedProof>): string {
  const state = proof.commit_state === 'not_committed' ? 'not committed' : 'outcome unknown';
  switch (doc.reason) {
    case 'LOOKUP_UNAVAILABLE':
      return line`escalated — outcome unknown: the lookup ${via(verificationToolOf(doc))} was unavailable, so nothing was guessed`;
    case 'APPROVAL_DENIED':
      return line`escalated — not committed: approval denied${doc.approval ? line` by ${doc.approval.approver}` : ''}`;
    case 'ATTEMPTS_EXHAUSTED':
      return line`escalated — ${state}: attempts exhausted (${doc.attempts_used}${doc.max_attempts ? line` of ${doc.max_attempts}` : ''} used)`;
    case 'DEPENDENCY_FAILURES_EXHAUSTED':
      return line`escalated — ${state}: repeated dependency failures (last ${doc.last_envelope?.code ?? 'unknown'})`;
    default:
      return line`escalated — ${state}: ${doc.reason}`;
  }
}

export function verdictOf(doc: TrailFacts): Verdict {
  const base = {
    status: doc.status,
    terminal: isTerminalStatus(doc.status),
    reason: doc.reason,
    duplicates_prevented: doc.duplicates_prevented,
  };
  const tool = verificationToolOf(doc);
  if (doc.status === 'succeeded') {
    const verification = doc.last_verification;
    if (verification?.outcome === 'found_committed' && verification.operator) {
      return {
        ...base,
        commit_state: 'committed',
        proven_by: 'manual_verification',
        proof_event_id: verification.event_id,
        attempt: verification.attempt,
        ...(verification.evidence_ref ? { evidence_ref: verification.evidence_ref } : {}),
        statement: line`committed — verified by a person (${verification.operator})${evidence(verification.evidence_ref)}${duplicates(doc.duplicates_prevented)}`,
      };
    }
    if (verification?.outcome === 'found_committed') {
      return {
        ...base,
        commit_state: 'committed',
        proven_by: 'verification',
        proof_event_id: verification.event_id,
        attempt: verification.attempt,
        ...(tool ? { verification_tool: tool } : {}),
        ...(verification.evidence_ref ? { evidence_ref: verification.evidence_ref } : {}),
        statement: line`committed — verified ${via(tool)}${evidence(verification.evidence_ref)}${duplicates(doc.duplicates_prevented)}`,
      };
    }
    const envelope = doc.last_envelope;
    return {
      ...base,
      commit_state: 'committed',
      proven_by: 'envelope',
      ...(envelope ? { proof_event_id: envelope.event_id, attempt: envelope.attempt } : {}),
      ...(envelope?.evidence_ref ? { evidence_ref: envelope.evidence_ref } : {}),
      statement: line`committed — confirmed by ${doc.tool ?? 'the tool'}'s envelope for attempt ${envelope?.attempt ?? doc.current_attempt}${evidence(envelope?.evidence_ref)}${duplicates(doc.duplicates_prevented)}`,
    };
  }
  const proof = uncommittedProof(doc);
  const withTool =
    tool && (doc.status === 'verifying' || proof.proven_by === 'verification') ? { verification_tool: tool } : {};
  const ref = proof.proven_by === 'verification' ? doc.last_verification?.evidence_ref : undefined;
  return {
    ...base,
    ...proof,
    ...withTool,
    ...(ref ? { evidence_ref: ref } : {}),
    statement:
      doc.status === 'escalated'
        ? escalationStatement(doc, proof)
        : doc.status === 'cancelled'
          ? line`cancelled — by ${doc.operator_action?.actor ?? 'an operator'}: ${doc.operator_action?.reason ?? doc.reason}`
          : pendingStatement(doc),
  };
}

function envelopeFact(event: ProjectedEvent, attempt: number, envelope: unknown): EnvelopeFact {
  const record = isRecord(envelope) ? envelope : {};
  const ok = record.ok === true;
  const verification = record.verification;
  const details = record.safe_details;
  const fact: EnvelopeFact = {
    attempt,
    event_id: event.event_id,
    ok,
    code: ok ? 'COMMITTED' : textOf(record.code ?? 'UNKNOWN'),
    commit_state: textOf(record.commit_state ?? 'unknown'),
  };
  if (typeof record.next_action === 'string') fact.next_action = record.next_action;
  const evidenceRef = stringField(verification, 'evidence_ref');
  if (evidenceRef) fact.evidence_ref = evidenceRef;
  const tool = stringField(details, 'verification_tool');
  if (tool) fact.verification_tool = tool;
  const field = stringField(details, 'field');
  if (field) fact.field = field;
  return fact;
}

export function evolveEvidenceTrail(current: EvidenceTrailDoc | undefined, event: ProjectedEvent): EvidenceTrailDoc {
  if (alreadyApplied(current, event)) return current as EvidenceTrailDoc;
  const base = current ?? emptyDoc(event);
  const doc: EvidenceTrailDoc = { ...base, revision: event.revision, position: event.position };
  const ledgerEvent = asLedgerEvent(event);
  let entry: EvidenceEntry;
  if (!ledgerEvent) {
    entry = entryFor(event, 'other', line`${event.type} (not interpreted by this version)`);
  } else {
    switch (ledgerEvent.type) {
      case 'StepPlanned': {
        const { run_id, tool, side_effect, policy } = ledgerEvent.data;
        if (base.status === 'unplanned') {
          doc.run_id = run_id;
          doc.tool = tool;
          doc.side_effect = side_effect;
          if (typeof policy?.verification_tool === 'string') doc.verification_tool = policy.verification_tool;
          if (typeof policy?.max_attempts === 'number') doc.max_attempts = policy.max_attempts;
        }
        entry = entryFor(event, 'plan', line`planned ${side_effect} ${tool} in run ${run_id}`);
        break;
      }
      case 'AttemptDispatched':
        Object.assign(doc, countDispatch(base, ledgerEvent.data.attempt));
        entry = entryFor(
          event,
          'attempt',
          line`attempt ${ledgerEvent.data.attempt} dispatched (input ${ledgerEvent.data.input_hash})`,
        );
        break;
      case 'EnvelopeRecorded': {
        const fact = envelopeFact(event, ledgerEvent.data.attempt, ledgerEvent.data.envelope);
        doc.last_envelope = fact;
        const summary = fact.ok
          ? line`attempt ${fact.attempt}: committed${evidence(fact.evidence_ref)}`
          : line`attempt ${fact.attempt}: ${fact.code}, ${fact.commit_state}, next ${fact.next_action ?? 'unknown'}`;
        entry = entryFor(event, 'envelope', summary);
        break;
      }
      case 'VerificationRecorded': {
        const { outcome, evidence_ref } = ledgerEvent.data;
        doc.last_verification = {
          event_id: event.event_id,
          outcome,
          attempt: base.current_attempt,
          ...(evidence_ref ? { evidence_ref } : {}),
        };
        entry = entryFor(
          event,
          'verification',
          line`verification of attempt ${base.current_attempt}: ${outcome}${evidence(evidence_ref)}`,
        );
        break;
      }
      case 'ApprovalRecorded':
        doc.approval = {
          decision: ledgerEvent.data.decision,
          approver: ledgerEvent.data.approver,
          event_id: event.event_id,
        };
        entry = entryFor(
          event,
          'approval',
          line`approval ${ledgerEvent.data.decision} by ${ledgerEvent.data.approver}`,
        );
        break;
      case 'OutcomeVerifiedManually': {
        const { outcome, evidence_ref, note } = ledgerEvent.data;
        doc.last_verification = {
          event_id: event.event_id,
          outcome,
          attempt: base.current_attempt,
          ...(evidence_ref ? { evidence_ref } : {}),
          operator: event.metadata.actor,
        };
        entry = entryFor(
          event,
          'verification',
          line`verification of attempt ${base.current_attempt} by a person: ${outcome}${evidence(evidence_ref)} (${note})`,
        );
        break;
      }
      case 'StepCancelled':
        doc.operator_action = {
          type: ledgerEvent.type,
          actor: event.metadata.actor,
          reason: ledgerEvent.data.reason,
          event_id: event.event_id,
        };
        entry = entryFor(event, 'operator', line`cancelled by ${event.metadata.actor}: ${ledgerEvent.data.reason}`);
        break;
      case 'StepReopened':
        doc.operator_action = {
          type: ledgerEvent.type,
          actor: event.metadata.actor,
          reason: ledgerEvent.data.reason,
          event_id: event.event_id,
        };
        doc.max_attempts = base.attempts_used + ledgerEvent.data.attempts;
        entry = entryFor(
          event,
          'operator',
          line`reopened by ${event.metadata.actor} with ${ledgerEvent.data.attempts} more attempt(s): ${ledgerEvent.data.reason}`,
        );
        break;
      case 'EscalationAcknowledged': {
        const { assignee, note, reassign } = ledgerEvent.data;
        doc.operator_action = {
          type: ledgerEvent.type,
          actor: event.metadata.actor,
          ...(note ? { reason: note } : {}),
          event_id: event.event_id,
        };
        entry = entryFor(
          event,
          'operator',
          line`escalation ${reassign === true ? 'reassigned' : 'acknowledged'} by ${event.metadata.actor}, assigned to ${assignee}${note ? line`: ${note}` : ''}`,
        );
        break;
      }
      case 'DispatchRefused': {
        const { code, attempt, replayed_attempt } = ledgerEvent.data;
        if (code === 'DUPLICATE_PREVENTED') doc.duplicates_prevented = base.duplicates_prevented + 1;
        const summary =
          code === 'DUPLICATE_PREVENTED'
            ? line`dispatch of attempt ${attempt} answered with the success of attempt ${replayed_attempt ?? '?'}: duplicate write prevented`
            : line`dispatch of attempt ${attempt} refused: ${code}`;
        entry = entryFor(event, 'refusal', summary);
        break;
      }
      case 'LateOutcomeRecorded': {
        const { attempt, envelope, possible_duplicate } = ledgerEvent.data;
        const outcome = envelope?.ok ? 'committed' : line`${envelope?.code}, ${envelope?.commit_state}`;
        if (possible_duplicate) doc.possible_duplicate = { attempt, event_id: event.event_id };
        // Which attempts may have written at the provider: what a person checks (§4.9).
        const last = base.attempts_used;
        const reached = last === attempt + 1 ? line`${attempt} and ${last}` : line`${attempt} to ${last}`;
        const summary = possible_duplicate
          ? line`late envelope of attempt ${attempt}: ${outcome} after a later attempt was granted: attempts ${reached} may each have reached the provider: possible duplicate write`
          : mayHaveReachedProvider(envelope)
            ? line`late envelope of attempt ${attempt}: ${outcome}: attempt ${attempt} may have reached the provider`
            : line`late envelope of attempt ${attempt}: ${outcome}`;
        entry = entryFor(event, 'envelope', summary);
        break;
      }
      case 'TransitionRecorded': {
        const { from, to, reason, directive } = ledgerEvent.data;
        doc.status = to;
        doc.reason = reason;
        if (directive?.not_before === undefined) delete doc.not_before;
        else doc.not_before = directive.not_before;
        entry = entryFor(
          event,
          'transition',
          line`${from} -> ${to} (${reason}); next ${directive?.next_action ?? 'unknown'}`,
        );
        break;
      }
    }
  }
  doc.entries = [...base.entries, entry];
  // The verdict is derived once the document is stored (sealEvidenceTrail), not after every event.
  return doc;
}

/** The trail with its verdict, as it is stored and answered. */
export function sealEvidenceTrail(doc: EvidenceTrailDoc): EvidenceTrailDoc {
  return { ...doc, verdict: verdictOf(doc) };
}

export const evidenceTrailProjection: Projection<EvidenceTrailDoc> = {
  name: 'evidence_trail',
  // 2: entries no longer carry the lease id; stored trails are rebuilt without it.
  version: 2,
  keyOf: (event) => scopedKey(event.metadata.tenant, event.metadata.operation_ref),
  evolve: evolveEvidenceTrail,
  seal: sealEvidenceTrail,
};
