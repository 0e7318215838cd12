/*
 * The read models shared by every instance on one database (docs/postgres.md, "Read models"): one
 * instance, the projector, folds the log and publishes what each of its read-model transactions
 * wrote; every instance copies what was published into a read model of its own, which its queries
 * read. Only the projector folds.
 */

/** What one or more read-model transactions of the projector wrote, in the order it wrote it. */
export interface ReadModelChanges {
  /** Projections emptied (and their checkpoint put back to zero) before the rows below. */
  resets: string[];
  /** Documents as stored, serialised (JSON). */
  docs: Array<{ projection: string; key: string; doc: string }>;
  links: Array<{ projection: string; stream: string; link: string }>;
  checkpoints: Array<{ projection: string; version: number; position: number; recordedAt: string | null }>;
}

/** Everything published after a change number, read at one instant of the shared store. */
export interface PublishedChanges extends ReadModelChanges {
  /** The change number of the last publication included: read after it next time. */
  change: number;
  /** How many times each projection has been reset in the shared store (a copy resets with it). */
  resetCounts: Record<string, number>;
}

/**
 * Held by the elected projector: its publications go through the session that holds the election,
 * so a projector whose session ended (a crash, a cut) can publish nothing more, and whoever is
 * elected next starts from what was published.
 */
export interface ProjectorLease {
  /** The versions the shared read models were last projected with, by projection. */
  versions(): Promise<Record<string, number>>;
  /** One transaction: every change, a new change number, and a wake-up for the other instances. */
  publish(changes: ReadModelChanges): Promise<number>;
  /** Called at most once, when the session that holds the election ends. */
  onLost(listener: (error: Error) => void): void;
  /** Gives the election up (the session ends with it). */
  release(): Promise<void>;
}

export interface SharedReadModelStore {
  /** Becomes the projector if no other instance is: undefined when another holds the election. */
  tryLead(): Promise<ProjectorLease | undefined>;
  /** What was published after `change` (0: everything), consistent at one instant. */
  pull(after: number): Promise<PublishedChanges>;
  /** Calls `listener` when a publication commits (best effort: a follower also reads on a timer). */
  onPublished(listener: () => void): () => void;
  close(): Promise<void>;
}
