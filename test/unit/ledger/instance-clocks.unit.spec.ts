/**
 * The skew rule (src/ledger/instance-clocks.ts, docs/reliability.md "Instances agree on time"):
 * take-overs are held while a live instance's clock is seen ahead of another's beyond the bound, by
 * the viewer or by a live peer that reports it, and while a peer on another base has not yet had
 * the time to judge the viewer's clock.
 */
import { judgeSkew, judgeWindows, type PeerView } from '../../../src/ledger/instance-clocks';

const settings = { heartbeatMs: 2_000, skewBoundMs: 1_000 };
const NOW = 100_000;

function peer(id: string, overrides: Partial<PeerView> = {}, ahead?: { instance_id: string; ms: number }): PeerView {
  return {
    heartbeat: {
      instance_id: id,
      boot_id: 'boot-b',
      ledger_ms: 0,
      monotonic_ms: 0,
      seq: 5,
      ...(ahead ? { ahead } : {}),
    },
    sharesBase: false,
    changedAtMs: NOW - 1_000,
    changesSeen: 2,
    maxLeadMs: 0,
    leadBounds: [0],
    ...overrides,
  };
}

const judge = (peers: PeerView[]) => judgeSkew({ selfId: 'me', peers, nowMonotonicMs: NOW, settings });

describe('judgeSkew', () => {
  it('alone, or with peers within the bound that have judged it: take-overs allowed', () => {
    expect(judge([])).toEqual({ livePeers: 0, skewMs: 0, takeOvers: 'allowed' });
    expect(judge([peer('p', { maxLeadMs: 1_000 })])).toMatchObject({
      livePeers: 1,
      skewMs: 1_000,
      takeOvers: 'allowed',
    });
  });

  it('a live peer seen ahead beyond the bound holds take-overs, with the figure and who', () => {
    expect(judge([peer('p', { maxLeadMs: 1_001 }), peer('q', { maxLeadMs: 300 })])).toEqual({
      livePeers: 2,
      skewMs: 1_001,
      ahead: { instance_id: 'p', ms: 1_001 },
      takeOvers: 'held',
      reason: 'skew',
    });
  });

  it('a peer that reports this instance (or another live one) ahead holds take-overs here too', () => {
    expect(judge([peer('p', {}, { instance_id: 'me', ms: 3_600_000 })])).toMatchObject({
      skewMs: 3_600_000,
      takeOvers: 'held',
      reason: 'skew',
    });
    expect(judge([peer('p', {}, { instance_id: 'q', ms: 5_000 }), peer('q')])).toMatchObject({
      skewMs: 5_000,
      takeOvers: 'held',
    });
    // About an instance no longer live: nothing to disagree with.
    expect(judge([peer('p', {}, { instance_id: 'gone', ms: 5_000 })])).toMatchObject({
      skewMs: 0,
      takeOvers: 'allowed',
    });
  });

  it('a peer whose heartbeat has not changed for three periods is not live, however far ahead', () => {
    const stale = peer('p', { maxLeadMs: 3_600_000, changedAtMs: NOW - 3 * settings.heartbeatMs - 1 });
    expect(judge([stale])).toEqual({ livePeers: 0, skewMs: 0, takeOvers: 'allowed' });
    expect(judge([{ ...stale, changedAtMs: NOW - 3 * settings.heartbeatMs }])).toMatchObject({
      livePeers: 1,
      takeOvers: 'held',
    });
  });

  it('until a peer on another base has written two heartbeats since first read, take-overs wait for its verdict', () => {
    expect(judge([peer('p', { changesSeen: 1 })])).toMatchObject({ takeOvers: 'held', reason: 'unjudged' });
    // One sharing this base (same boot) computes the same time: nothing to wait for.
    expect(judge([peer('p', { changesSeen: 0, sharesBase: true })])).toMatchObject({ takeOvers: 'allowed' });
  });

  it('a lead of exactly the bound is within it; the bound is a setting', () => {
    expect(judge([peer('p', { maxLeadMs: 1_000 })]).takeOvers).toBe('allowed');
    expect(
      judgeSkew({
        selfId: 'me',
        peers: [peer('p', { maxLeadMs: 300 })],
        nowMonotonicMs: NOW,
        settings: { ...settings, skewBoundMs: 250 },
      }).takeOvers,
    ).toBe('held');
  });
});

/**
 * Windows another instance may have started (docs/reliability.md, "Windows across instances"):
 * closed only the largest upper bound of this instance's lead over a live peer after their end, and
 * not judged at all while take-overs are held or that bound is beyond the bound plus one period.
 */
describe('judgeWindows', () => {
  const windows = (peers: PeerView[]) =>
    judgeWindows({ judgement: judge(peers), peers, nowMonotonicMs: NOW, settings });

  it('alone: no margin', () => {
    expect(windows([])).toEqual({ margin_ms: 0 });
  });

  it('the margin is the tightest recent upper bound of this lead over each live peer, the largest of them', () => {
    expect(windows([peer('p', { leadBounds: [2_100, 900, 1_400] }), peer('q', { leadBounds: [300] })])).toEqual({
      margin_ms: 900,
    });
    // Behind every peer: no margin, never a negative one.
    expect(windows([peer('p', { leadBounds: [-3_000] })])).toEqual({ margin_ms: 0 });
    // A peer no longer live does not count.
    expect(windows([peer('p', { leadBounds: [2_500], changedAtMs: NOW - 3 * settings.heartbeatMs - 1 })])).toEqual({
      margin_ms: 0,
    });
  });

  it('a margin beyond the bound plus one heartbeat period: windows are not judged', () => {
    expect(windows([peer('p', { leadBounds: [3_000] })])).toEqual({ margin_ms: 3_000 });
    expect(windows([peer('p', { leadBounds: [3_001] })])).toEqual({ unbounded: 'skew' });
  });

  it('while take-overs are held, for a skew or for peers not yet compared, windows are not judged', () => {
    expect(windows([peer('p', { maxLeadMs: 1_001, leadBounds: [-1_001] })])).toEqual({ unbounded: 'skew' });
    expect(windows([peer('p', {}, { instance_id: 'me', ms: 1_500 })])).toEqual({ unbounded: 'skew' });
    expect(windows([peer('p', { changesSeen: 1 })])).toEqual({ unbounded: 'unjudged' });
  });
});
