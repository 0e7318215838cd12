import type { AnyProjection, ProjectedEvent } from '../../src/projection';

export interface FoldedModel {
  docs: Map<string, unknown>;
  links: Map<string, string>;
}

/**
 * The reference model of what the engine does with one projection, in memory: link, key, evolve,
 * one event at a time. Unit tests fold with it; the engine's read model must agree with it.
 */
export function foldProjection(
  projection: AnyProjection,
  events: readonly ProjectedEvent[],
  model: FoldedModel = { docs: new Map(), links: new Map() },
): FoldedModel {
  for (const event of events) {
    let link = model.links.get(event.stream);
    const made = projection.linkOf?.(event);
    if (made !== undefined) {
      link = made;
      model.links.set(event.stream, made);
    }
    const key = projection.keyOf(event, link);
    if (key === undefined) continue;
    // Sealed after every event: what the engine stores whenever it writes the document.
    const doc = projection.evolve(model.docs.get(key), event);
    model.docs.set(key, projection.seal ? projection.seal(doc) : doc);
  }
  return model;
}

export function docOf<Doc>(projection: AnyProjection, events: readonly ProjectedEvent[], key: string): Doc {
  const doc = foldProjection(projection, events).docs.get(key);
  if (doc === undefined) throw new Error(`no document ${key}`);
  return doc as Doc;
}
