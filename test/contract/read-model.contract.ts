/**
 * The one contract every read-model adapter passes (src/store/read-model.port.ts): what the
 * projection engine writes, what the queries read back, and the due steps the work feed asks for
 * by meaning (docs/work-feed.md), through the port only.
 */
import type { Projection } from '@recovery-ledger/projections';
import { stepStateProjection } from '@recovery-ledger/projections';
import { scopedKey } from '@recovery-ledger/projections';
import type { ReadModel } from '../../src/store/read-model.port';

export interface ReadModelUnderTest {
  readModel: ReadModel;
  cleanup(): Promise<void> | void;
}

interface NoteDoc {
  text: string;
  rank: number;
}

/** A small projection with one declared column, for the storage half of the contract. */
const notes: Projection<NoteDoc> = {
  name: 'contract_notes',
  version: 1,
  keyOf: () => undefined,
  evolve: (doc: unknown) => doc as NoteDoc,
  columns: { rank: 'integer' },
  indexes: [['rank']],
  index: (doc: NoteDoc) => ({ rank: doc.rank }),
} as unknown as Projection<NoteDoc>;

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

/** A step_state document as the projection writes it, reduced to what its declared columns read. */
function step(
  tenant: string,
  ref: string,
  tool: string,
  sinceMs: number,
  status = 'planned',
  revision = 1,
): [string, unknown] {
  return [
    scopedKey(tenant, ref),
    {
      tenant,
      operation_ref: ref,
      status,
      tool,
      since: new Date(sinceMs).toISOString(),
      attempts_used: 0,
      revision,
    },
  ];
}

export function testReadModel(name: string, factory: () => Promise<ReadModelUnderTest> | ReadModelUnderTest): void {
  describe(`read model contract: ${name}`, () => {
    let under: ReadModelUnderTest;
    let readModel: ReadModel;

    beforeEach(async () => {
      under = await factory();
      readModel = under.readModel;
      readModel.register(notes as never);
      readModel.register(stepStateProjection as never);
    });
    afterEach(async () => {
      await under.cleanup();
    });

    function writeSteps(steps: Array<[string, unknown]>, position = 1): void {
      readModel.transaction(() => {
        for (const [key, doc] of steps) readModel.writeDoc('step_state', key, doc);
        readModel.setCheckpoint('step_state', position, null);
      });
    }

    it('keeps documents, links and the checkpoint written in one transaction', () => {
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'first', rank: 2 });
        readModel.setLink('contract_notes', 'stream-a', 'a');
        readModel.setCheckpoint('contract_notes', 7, '2026-01-01T00:00:00.000Z');
      });
      expect(readModel.loadDoc('contract_notes', 'a')).toEqual({ text: 'first', rank: 2 });
      expect(readModel.getDoc('contract_notes', 'a')).toEqual({ text: 'first', rank: 2 });
      expect(readModel.link('contract_notes', 'stream-a')).toBe('a');
      expect(readModel.checkpoint('contract_notes')).toMatchObject({ position: 7, version: 1 });
      expect(readModel.checkpoints().map((c) => c.projection)).toEqual(
        expect.arrayContaining(['contract_notes', 'step_state']),
      );
    });

    it('writes nothing of a transaction that throws', () => {
      expect(() =>
        readModel.transaction(() => {
          readModel.writeDoc('contract_notes', 'a', { text: 'lost', rank: 1 });
          readModel.setCheckpoint('contract_notes', 3, null);
          throw new Error('batch failed');
        }),
      ).toThrow('batch failed');
      expect(readModel.loadDoc('contract_notes', 'a')).toBeUndefined();
      expect(readModel.checkpoint('contract_notes').position).toBe(0);
    });

    it('selects by a declared column, ordered and limited', () => {
      readModel.transaction(() => {
        for (const [key, rank] of [
          ['a', 3],
          ['b', 1],
          ['c', 2],
        ] as const)
          readModel.writeDoc('contract_notes', key, { text: key, rank });
      });
      const rows = readModel.select<NoteDoc>('contract_notes', {
        where: [{ column: 'rank', op: '>=', value: 2 }],
        orderBy: [{ column: 'rank' }],
      });
      expect(rows.map((row) => row.key)).toEqual(['c', 'a']);
      expect(readModel.select('contract_notes', { orderBy: [{ column: 'rank' }], limit: 1 })).toHaveLength(1);
    });

    it('reset empties a projection and puts its checkpoint back to zero', () => {
      writeSteps([step('t1', 'op-1', 'pay', T0)], 5);
      readModel.reset('step_state');
      expect(readModel.loadDoc('step_state', scopedKey('t1', 'op-1'))).toBeUndefined();
      expect(readModel.checkpoint('step_state').position).toBe(0);
      expect(readModel.dueSteps({ tenant: 't1', tools: [], nowMs: T0 + 1, limit: 10 })).toEqual([]);
    });

    it('keeps the digest of its rows and the hash of the event at its position with each commit', () => {
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'first', rank: 2 });
        readModel.writeDoc('contract_notes', 'b', { text: 'second', rank: 1 });
        readModel.setLink('contract_notes', 'stream-a', 'a');
        readModel.setCheckpoint('contract_notes', 4, null, 'hash-at-4');
      });
      // A document written again replaces its row's part of the digest.
      readModel.transaction(() => readModel.writeDoc('contract_notes', 'a', { text: 'again', rank: 3 }));
      const pages = readModel.recomputeDigest('contract_notes');
      let step = pages.next();
      while (!step.done) step = pages.next();
      expect(step.value.rows).toBe(3);
      expect(readModel.checkpoint('contract_notes')).toMatchObject({
        position: 4,
        event_hash: 'hash-at-4',
        digest: step.value.digest,
      });
    });

    it('rebuilds beside: reads keep the live rows until the swap, and an abandoned rebuild leaves them', () => {
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'live', rank: 1 });
        readModel.setCheckpoint('contract_notes', 5, null);
      });
      readModel.beginRebuild('contract_notes');
      expect(readModel.checkpoint('contract_notes').position).toBe(0);
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'b', { text: 'rebuilt', rank: 2 });
        readModel.setCheckpoint('contract_notes', 6, null);
      });
      expect(readModel.getDoc('contract_notes', 'a')).toEqual({ text: 'live', rank: 1 });
      expect(readModel.getDoc('contract_notes', 'b')).toBeUndefined();
      expect(readModel.checkpoints().find((c) => c.projection === 'contract_notes')?.position).toBe(5);
      readModel.finishRebuild('contract_notes');
      expect(readModel.getDoc('contract_notes', 'a')).toBeUndefined();
      expect(readModel.getDoc('contract_notes', 'b')).toEqual({ text: 'rebuilt', rank: 2 });
      expect(readModel.select('contract_notes', { where: [{ column: 'rank', op: '=', value: 2 }] })).toHaveLength(1);
      expect(readModel.checkpoint('contract_notes').position).toBe(6);

      readModel.beginRebuild('contract_notes');
      readModel.transaction(() => readModel.writeDoc('contract_notes', 'c', { text: 'dropped', rank: 3 }));
      readModel.abandonRebuild('contract_notes');
      expect(readModel.getDoc('contract_notes', 'c')).toBeUndefined();
      expect(readModel.getDoc('contract_notes', 'b')).toEqual({ text: 'rebuilt', rank: 2 });
      expect(readModel.checkpoint('contract_notes').position).toBe(6);
      expect(readModel.checkpoints().map((c) => c.projection)).not.toContain('contract_notes__next');
    });

    it('answers the due steps of one tenant, soonest first, with what a lease needs', () => {
      writeSteps([
        step('t1', 'op-late', 'pay', T0 + 2000, 'planned', 4),
        step('t1', 'op-early', 'pay', T0 + 1000),
        step('t1', 'op-other-tool', 'mail', T0 + 500),
        step('t1', 'op-future', 'pay', T0 + 60_000),
        step('t1', 'op-done', 'pay', T0, 'succeeded'),
        step('t2', 'op-elsewhere', 'pay', T0),
      ]);
      const nowMs = T0 + 5000;
      expect(readModel.dueSteps({ tenant: 't1', tools: ['pay'], nowMs, limit: 10 })).toEqual([
        { key: scopedKey('t1', 'op-early'), operationRef: 'op-early', revision: 1, dueMs: T0 + 1000 },
        { key: scopedKey('t1', 'op-late'), operationRef: 'op-late', revision: 4, dueMs: T0 + 2000 },
      ]);
      expect(readModel.dueSteps({ tenant: 't1', tools: [], nowMs, limit: 10 }).map((due) => due.operationRef)).toEqual([
        'op-other-tool',
        'op-early',
        'op-late',
      ]);
      expect(readModel.dueSteps({ tenant: 't1', tools: [], nowMs, limit: 1 })).toHaveLength(1);
      expect(readModel.dueSteps({ tenant: 't1', tools: ['pay'], nowMs: T0, limit: 10 })).toEqual([]);
    });

    it('breaks a tie of due instants by key', () => {
      writeSteps([step('t1', 'op-b', 'pay', T0), step('t1', 'op-a', 'pay', T0)]);
      expect(
        readModel.dueSteps({ tenant: 't1', tools: [], nowMs: T0, limit: 10 }).map((due) => due.operationRef),
      ).toEqual(['op-a', 'op-b']);
    });

    it('counts due steps per tool with the oldest due instant, of one tenant or of all', () => {
      writeSteps([
        step('t1', 'op-1', 'pay', T0 + 1000),
        step('t1', 'op-2', 'pay', T0 + 2000),
        step('t1', 'op-3', 'mail', T0 + 3000),
        step('t1', 'op-4', 'mail', T0 + 60_000),
        step('t2', 'op-5', 'pay', T0 + 500),
      ]);
      const byTool = (rows: ReturnType<ReadModel['dueDepth']>) =>
        Object.fromEntries(rows.map((row) => [row.tool, { depth: row.depth, oldestDueMs: row.oldestDueMs }]));
      expect(byTool(readModel.dueDepth('t1', T0 + 5000))).toEqual({
        pay: { depth: 2, oldestDueMs: T0 + 1000 },
        mail: { depth: 1, oldestDueMs: T0 + 3000 },
      });
      expect(byTool(readModel.dueDepth(undefined, T0 + 5000))).toEqual({
        pay: { depth: 3, oldestDueMs: T0 + 500 },
        mail: { depth: 1, oldestDueMs: T0 + 3000 },
      });
      expect(readModel.dueDepth('t3', T0 + 5000)).toEqual([]);
    });

    it('keeps a projection whose version changed, served, until its new version is swapped in', () => {
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'v1', rank: 1 });
        readModel.setCheckpoint('contract_notes', 9, null);
      });
      expect(readModel.register({ ...notes, version: 2 } as never)).toEqual({ reset: false });
      expect(readModel.getDoc('contract_notes', 'a')).toEqual({ text: 'v1', rank: 1 });
      expect(readModel.select('contract_notes', { where: [{ column: 'rank', op: '=', value: 1 }] })).toHaveLength(1);
      // The version that wrote the rows: how the engine knows to build the new one beside them.
      expect(readModel.checkpoint('contract_notes')).toMatchObject({ position: 9, version: 1 });
      readModel.beginRebuild('contract_notes');
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'v2', rank: 1 });
        readModel.setCheckpoint('contract_notes', 9, null);
      });
      expect(readModel.getDoc('contract_notes', 'a')).toEqual({ text: 'v1', rank: 1 });
      readModel.finishRebuild('contract_notes');
      expect(readModel.getDoc('contract_notes', 'a')).toEqual({ text: 'v2', rank: 1 });
      expect(readModel.checkpoint('contract_notes')).toMatchObject({ position: 9, version: 2 });
    });

    it('starts a projection again when its columns change', () => {
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'v1', rank: 1 });
        readModel.setCheckpoint('contract_notes', 9, null);
      });
      const reshaped = { ...notes, version: 2, columns: { rank: 'integer', text: 'text' }, indexes: [] };
      expect(readModel.register(reshaped as never)).toEqual({ reset: true });
      expect(readModel.loadDoc('contract_notes', 'a')).toBeUndefined();
      expect(readModel.checkpoint('contract_notes')).toMatchObject({ position: 0, version: 2 });
    });

    it('resumes a set kept beside by the same version, and starts one of another version from zero', () => {
      readModel.beginRebuild('contract_notes');
      readModel.transaction(() => {
        readModel.writeDoc('contract_notes', 'a', { text: 'beside', rank: 1 });
        readModel.setCheckpoint('contract_notes', 7, null);
      });
      readModel.abandonRebuild('contract_notes', { keep: true });
      expect(readModel.getDoc('contract_notes', 'a')).toBeUndefined();
      readModel.beginRebuild('contract_notes', { resume: true });
      expect(readModel.checkpoint('contract_notes').position).toBe(7);
      expect(readModel.loadDoc('contract_notes', 'a')).toEqual({ text: 'beside', rank: 1 });
      readModel.abandonRebuild('contract_notes', { keep: true });

      readModel.register({ ...notes, version: 2 } as never);
      readModel.beginRebuild('contract_notes', { resume: true });
      expect(readModel.checkpoint('contract_notes').position).toBe(0);
      expect(readModel.loadDoc('contract_notes', 'a')).toBeUndefined();
      readModel.abandonRebuild('contract_notes');
    });

    it('says whether it is open', () => {
      expect(readModel.isOpen).toBe(true);
      readModel.close();
      expect(readModel.isOpen).toBe(false);
    });
  });
}
