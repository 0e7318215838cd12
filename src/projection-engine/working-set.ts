import type { AnyProjection } from '@recovery-ledger/projections';
import type { StoredEvent } from '../store/event-store.port';
import type { ReadModel } from '../store/read-model.port';

const NO_LINK = Symbol('no link');

/**
 * What one projection has folded since its last commit: the documents and stream links it read
 * (through from the read model) and changed. The live lane folds one batch into a fresh set and
 * commits it at once; a rebuild folds many batches into one set, so a document touched by every
 * batch (a tool's trust metrics, a long run) is parsed once and written once per commit instead of
 * once per batch.
 */
export class ProjectionWorkingSet {
  private readonly docs = new Map<string, unknown>();
  private readonly changed = new Set<string>();
  private readonly links = new Map<string, string | typeof NO_LINK>();
  private readonly newLinks = new Map<string, string>();
  /** Events folded into this set. */
  events = 0;

  /** `after`: the checkpoint the set starts from; events at or before it are skipped. */
  constructor(
    readonly projection: AnyProjection,
    private readonly readModel: ReadModel,
    readonly after: number,
  ) {}

  /** Documents held, changed or not (what a rebuild bounds its memory by). */
  get size(): number {
    return this.docs.size;
  }

  fold(batch: readonly StoredEvent[]): void {
    const { projection, readModel } = this;
    for (const event of batch) {
      if (event.position <= this.after) continue;
      this.events += 1;
      let link: string | undefined;
      if (projection.linkOf) {
        let known = this.links.get(event.stream);
        if (known === undefined) {
          known = readModel.link(projection.name, event.stream) ?? NO_LINK;
          this.links.set(event.stream, known);
        }
        link = known === NO_LINK ? undefined : known;
        const made = projection.linkOf(event);
        if (made !== undefined && made !== link) {
          link = made;
          this.links.set(event.stream, made);
          this.newLinks.set(event.stream, made);
        }
      }
      const key = projection.keyOf(event, link);
      if (key === undefined) continue;
      const before = this.docs.has(key) ? this.docs.get(key) : readModel.loadDoc(projection.name, key);
      const after = projection.evolve(before, event);
      this.docs.set(key, after);
      if (after !== before) this.changed.add(key);
    }
  }

  /** Writes what changed; call inside the read model transaction that also sets the checkpoint. */
  write(): void {
    const { projection, readModel } = this;
    for (const key of this.changed) {
      const doc = this.docs.get(key);
      readModel.writeDoc(projection.name, key, projection.seal ? projection.seal(doc) : doc);
    }
    for (const [stream, link] of this.newLinks) readModel.setLink(projection.name, stream, link);
  }
}
