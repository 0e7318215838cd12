import type { AnyProjection, DocRow, SelectOptions } from '@recovery-ledger/projections';
import type { Checkpoint, DueDepth, DueStep, DueStepsQuery, ReadModel } from '../store/read-model.port';
import type { ReadModelChanges } from '../store/shared-read-model.port';

/**
 * A read model that tells what each of its committed transactions wrote: the projector's copy of
 * the shared read models (projector-election.ts), whose every transaction is then published. A
 * transaction that throws rolled back and tells nothing.
 */
export class RecordingReadModel implements ReadModel {
  private current: ReadModelChanges | undefined;
  private depth = 0;
  /**
   * Projections being rebuilt beside their live tables: what the rebuild writes is not published
   * as it goes (the copies keep serving the live set, as this instance does), but whole at the swap.
   */
  private readonly rebuilding = new Set<string>();

  constructor(
    private readonly inner: ReadModel,
    private readonly committed: (changes: ReadModelChanges) => void,
  ) {}

  get isOpen(): boolean {
    return this.inner.isOpen;
  }

  transaction<T>(work: () => T): T {
    if (this.depth > 0) return this.inner.transaction(work);
    this.current = { resets: [], docs: [], links: [], checkpoints: [] };
    this.depth++;
    let changes: ReadModelChanges | undefined;
    try {
      const result = this.inner.transaction(work);
      changes = this.current;
      return result;
    } finally {
      this.depth--;
      this.current = undefined;
      if (changes && !isEmpty(changes)) this.committed(changes);
    }
  }

  /** A write outside a transaction is one of its own. */
  private record(write: (changes: ReadModelChanges) => void, apply: () => void): void {
    if (this.current) {
      apply();
      write(this.current);
      return;
    }
    this.transaction(() => this.record(write, apply));
  }

  writeDoc(name: string, key: string, doc: unknown): void {
    if (this.rebuilding.has(name)) return this.inner.writeDoc(name, key, doc);
    this.record(
      (changes) => changes.docs.push({ projection: name, key, doc: JSON.stringify(doc) }),
      () => this.inner.writeDoc(name, key, doc),
    );
  }

  setLink(name: string, stream: string, link: string): void {
    if (this.rebuilding.has(name)) return this.inner.setLink(name, stream, link);
    this.record(
      (changes) => changes.links.push({ projection: name, stream, link }),
      () => this.inner.setLink(name, stream, link),
    );
  }

  setCheckpoint(name: string, position: number, recordedAt: string | null): void {
    if (this.rebuilding.has(name)) return this.inner.setCheckpoint(name, position, recordedAt);
    this.record(
      (changes) => changes.checkpoints.push({ projection: name, version: this.versionOf(name), position, recordedAt }),
      () => this.inner.setCheckpoint(name, position, recordedAt),
    );
  }

  reset(name: string): void {
    if (this.rebuilding.has(name)) return this.inner.reset(name);
    this.record(
      (changes) => {
        changes.resets.push(name);
        // What this transaction wrote of it before is gone with it.
        changes.docs = changes.docs.filter((row) => row.projection !== name);
        changes.links = changes.links.filter((row) => row.projection !== name);
        changes.checkpoints = changes.checkpoints.filter((row) => row.projection !== name);
      },
      () => this.inner.reset(name),
    );
  }

  beginRebuild(name: string, options?: { resume?: boolean }): void {
    this.inner.beginRebuild(name, options);
    this.rebuilding.add(name);
  }

  /** The swap is published as the projection emptied and written again whole, in one transaction. */
  finishRebuild(name: string): void {
    this.transaction(() => {
      this.inner.finishRebuild(name);
      this.rebuilding.delete(name);
      const { docs, links } = this.inner.dump(name);
      const checkpoint = this.inner.checkpoint(name);
      const changes = this.current!;
      changes.resets.push(name);
      changes.docs = changes.docs.filter((row) => row.projection !== name);
      changes.links = changes.links.filter((row) => row.projection !== name);
      changes.checkpoints = changes.checkpoints.filter((row) => row.projection !== name);
      for (const row of docs) changes.docs.push({ projection: name, key: row.key, doc: row.doc });
      for (const row of links) changes.links.push({ projection: name, stream: row.stream, link: row.link });
      changes.checkpoints.push({
        projection: name,
        version: this.versionOf(name),
        position: checkpoint.position,
        recordedAt: checkpoint.recorded_at,
      });
    });
  }

  abandonRebuild(name: string, options?: { keep?: boolean }): void {
    this.inner.abandonRebuild(name, options);
    this.rebuilding.delete(name);
  }

  recomputeDigest(name: string): ReturnType<ReadModel['recomputeDigest']> {
    return this.inner.recomputeDigest(name);
  }

  private readonly versions = new Map<string, number>();

  private versionOf(name: string): number {
    return this.versions.get(name) ?? this.inner.checkpoint(name).version;
  }

  register(projection: AnyProjection): { reset: boolean } {
    this.versions.set(projection.name, projection.version);
    return this.inner.register(projection);
  }

  checkpoint(name: string): Checkpoint {
    return this.inner.checkpoint(name);
  }

  checkpoints(): Checkpoint[] {
    return this.inner.checkpoints();
  }

  loadDoc<Doc>(name: string, key: string): Doc | undefined {
    return this.inner.loadDoc<Doc>(name, key);
  }

  getDoc<Doc>(name: string, key: string): Doc | undefined {
    return this.inner.getDoc<Doc>(name, key);
  }

  select<Doc>(name: string, options?: SelectOptions): DocRow<Doc>[] {
    return this.inner.select<Doc>(name, options);
  }

  link(name: string, stream: string): string | undefined {
    return this.inner.link(name, stream);
  }

  dueSteps(query: DueStepsQuery): DueStep[] {
    return this.inner.dueSteps(query);
  }

  dueDepth(tenant: string | undefined, nowMs: number): DueDepth[] {
    return this.inner.dueDepth(tenant, nowMs);
  }

  dump(name: string): ReturnType<ReadModel['dump']> {
    return this.inner.dump(name);
  }

  rowsInKeyOrder(name: string): Generator<[string, string]> {
    return this.inner.rowsInKeyOrder(name);
  }

  close(): void {
    this.inner.close();
  }
}

function isEmpty(changes: ReadModelChanges): boolean {
  return (
    changes.resets.length === 0 &&
    changes.docs.length === 0 &&
    changes.links.length === 0 &&
    changes.checkpoints.length === 0
  );
}
