/**
 * FOLD_VERSION names what `evolve` folds (packages/core/src/domain/step-state.ts): a state kept
 * beside a stream is trusted only by a reader of the same version (docs/architecture.md, "Reading
 * a stream"). Here four fixed histories (stored events, written once from the decider and kept as
 * they are in fold-corpus.json) are folded, and what they fold to is pinned with the version. A
 * change to the fold that changes any of it fails here: give FOLD_VERSION a new value, then pin
 * the new fingerprint with it; kept states of the old version are then folded again from the log.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, fold, FOLD_VERSION, type RecordedEvent } from '@recovery-ledger/core';
import corpus from './fold-corpus.json';

/** Every state along every history, not only the last: a fold that differs anywhere shows. */
function fingerprint(): string {
  const states = (corpus as unknown as RecordedEvent[][]).map((history) =>
    history.map((_, index) => fold(history.slice(0, index + 1))),
  );
  return createHash('sha256').update(canonicalJson(states)).digest('hex');
}

describe('the fold version', () => {
  it('is pinned to what the fold makes of fixed histories', () => {
    expect({ FOLD_VERSION, fingerprint: fingerprint() }).toEqual({
      FOLD_VERSION: 'step-state/1',
      fingerprint: '9bd0af922e337fee4e03c9478cd1d1d673c9a85ef9013555c22af702f3cde23b',
    });
  });

  it('folds a kept state onward as it folds the whole history', () => {
    for (const history of corpus as unknown as RecordedEvent[][]) {
      const middle = Math.floor(history.length / 2);
      const kept = JSON.parse(JSON.stringify(fold(history.slice(0, middle))));
      expect(fold(history.slice(middle), kept)).toEqual(fold(history));
    }
  });
});
