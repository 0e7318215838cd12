/**
 * The in-memory store the projection tests fold over is held to the same port contract as the real
 * adapters, so what those tests prove about the projections holds on the stores the service runs.
 * It keeps no anchors and no index, and says so (`keepsAnchors` false, `indexedStreams` undefined):
 * the suite's anchor and index cases then check only that it claims none.
 */
import { testEventStore } from '../../contract/event-store.contract';
import { MemoryEventStore } from './support/memory-event-store';

testEventStore('memory (dense positions)', async () => {
  const store = new MemoryEventStore();
  return { store, cleanup: () => store.close() };
});

testEventStore('memory (positions with gaps)', async () => {
  const store = new MemoryEventStore({ firstPosition: 1_000, positionStride: 7, batchSize: 2 });
  return { store, cleanup: () => store.close() };
});
