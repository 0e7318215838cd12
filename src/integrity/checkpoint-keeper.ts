import type { EventStore, StoredEvent } from '../store/event-store.port';
import type { IntegrityFinding, LogAudit } from './log-audit';
import {
  readVerifiedCheckpoint,
  verifyTail,
  writeVerifiedCheckpoint,
  type TailCheck,
  type VerifiedCheckpoint,
} from './verified-checkpoint';

export interface CheckpointKeeperOptions {
  store: EventStore;
  /** Where the checkpoint is kept (beside the data: it vouches only for the log it sits with). */
  file: string;
  anchorKey?: string;
  checkEvent?: (event: StoredEvent) => string | undefined;
  now: () => Date;
  /** How often the running service moves the checkpoint up to the log's head. */
  intervalMs: number;
  /** A rest between pages of a check made while the service runs (a bounded share of a core). */
  pause: () => Promise<void>;
  onRead?: (events: number) => void;
  /** A check found the log broken: the streams named are refused, readiness goes down. */
  onFindings: (findings: IntegrityFinding[], check: 'start' | 'running') => void;
  onError: (error: Error) => void;
}

/** How long a stop waits for the checkpoint's last move (`CheckpointKeeper.stop`). */
export const STOP_MOVE_MS = 2_000;

export type StartCheck =
  | { state: 'no_checkpoint' }
  | { state: 'verified' | 'broken'; from: number; to: number; events_read: number; findings: number };

/**
 * Keeps the last verified checkpoint (src/integrity/verified-checkpoint.ts) moving with the log:
 * at start it checks what was appended since it, before anything is served; after a clean
 * whole-log audit it records the audited log; while the service runs, every `intervalMs`, and at a
 * clean stop, it checks what was appended since and moves up. So a restart reads only what the
 * last interval appended (or nothing, after a clean stop), however long the log.
 */
export class CheckpointKeeper {
  private current: VerifiedCheckpoint | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Set once a check found the log broken: the checkpoint never moves over a broken log. */
  private broken = false;
  /** When a stop stops waiting for the last move (set by `stop`). */
  private stopBy: number | undefined;
  /** Settles when a stop begins: a paced check's rest between pages ends then, not when its share is spent. */
  private readonly stopBegun: Promise<void>;
  private beginStop: () => void = () => undefined;

  constructor(private readonly options: CheckpointKeeperOptions) {
    this.stopBegun = new Promise<void>((resolve) => (this.beginStop = resolve));
  }

  get checkpoint(): VerifiedCheckpoint | undefined {
    return this.current;
  }

  /** The start-up check: only what follows the checkpoint, and that the log still holds it. */
  async checkAtStart(): Promise<StartCheck> {
    const { store } = this.options;
    if (!store.keepsAnchors) return { state: 'no_checkpoint' };
    const checkpoint = readVerifiedCheckpoint(this.options.file);
    if (!checkpoint) return { state: 'no_checkpoint' };
    const check = await verifyTail(store, checkpoint, {
      anchorKey: this.options.anchorKey,
      checkEvent: this.options.checkEvent,
      onRead: this.options.onRead,
    });
    const to = this.settle(check, checkpoint, 'start');
    return {
      state: check.ok ? 'verified' : 'broken',
      from: checkpoint.position,
      to,
      events_read: check.events_read,
      findings: check.findings.length,
    };
  }

  /**
   * After a whole-log audit: a clean one is the new checkpoint (its anchor, as it recomputed it).
   * Never rejects: a store that fails the read of the audited position (an outage) leaves no
   * checkpoint, reported to `onError`, and the next start audits the whole log again.
   */
  async afterAudit(audit: LogAudit): Promise<void> {
    if (!audit.ok || !audit.anchored) {
      if (!audit.ok) this.broken = true;
      return;
    }
    const { position, events, log_hash } = audit.recomputed;
    // A checkpoint further on already covers this audit's log (it only grew since).
    if (this.current && this.current.position >= position) return;
    let at: StoredEvent | undefined;
    try {
      [at] = position > 0 ? await this.options.store.readAll({ after: position - 1, limit: 1 }) : [];
    } catch (error) {
      this.options.onError(error as Error);
      return;
    }
    const last =
      at && at.position === position
        ? { stream: at.stream, revision: at.revision, hash: String(at.metadata.hash) }
        : undefined;
    if (position > 0 && !last) return;
    this.save({ position, events, log_hash, ...(last ? { last } : {}) }, 'audit');
  }

  /** Moves the checkpoint every `intervalMs` while the service runs. */
  start(): void {
    if (!this.options.store.keepsAnchors) return;
    this.timer = setInterval(() => void this.advance(), this.options.intervalMs);
    this.timer.unref();
  }

  /**
   * The last move, at a clean stop: the next start then reads nothing. A stop does not wait for it
   * long: a paced check's rest between pages ends at once, and a check still reading past
   * `STOP_MOVE_MS` ends at its next page, leaving the checkpoint where it was, which costs the next
   * start only a longer tail to read (docs/reliability.md, "Start-up without a full pass").
   */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.stopBy = this.options.now().getTime() + STOP_MOVE_MS;
    this.beginStop();
    await this.running;
    await this.advance(false);
  }

  /** Checks what was appended since the checkpoint and moves it up; one at a time. */
  advance(paced = true): Promise<void> {
    if (this.running) return this.running;
    const from = this.current;
    if (!from || this.broken) return Promise.resolve();
    this.running = verifyTail(this.options.store, from, {
      anchorKey: this.options.anchorKey,
      checkEvent: this.options.checkEvent,
      onRead: this.options.onRead,
      ...(paced ? { pause: () => Promise.race([this.options.pause(), this.stopBegun]) } : {}),
      stopped: () => this.stopBy !== undefined && this.options.now().getTime() > this.stopBy,
    })
      .then((check) => {
        this.settle(check, from, 'running');
      })
      .catch((error: Error) => this.options.onError(error))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private settle(check: TailCheck, from: VerifiedCheckpoint, when: 'start' | 'running'): number {
    if (!check.ok) {
      this.broken = true;
      this.options.onFindings(check.findings, when);
      return from.position;
    }
    this.current = from;
    if (check.verified && check.verified.position !== from.position) this.save(check.verified, 'tail');
    return check.verified?.position ?? from.position;
  }

  private save(verified: NonNullable<TailCheck['verified']>, by: VerifiedCheckpoint['by']): void {
    try {
      this.current = writeVerifiedCheckpoint(
        this.options.file,
        { ...verified, by, verified_at: this.options.now().toISOString() },
        this.options.anchorKey,
      );
    } catch (error) {
      this.options.onError(error as Error);
    }
  }
}
