import { reactionsTo, retryDelayMs } from '../../src/webhooks/notification-rules';
import { signatureHeader, verifySignature } from '../../src/webhooks/webhook-signature';

const transition = (to: string) => ({
  type: 'TransitionRecorded',
  event_id: 'e1',
  position: 9,
  data: { from: 'dispatched', to, reason: 'X' },
  metadata: { tenant: 'acme', operation_ref: 'r', recorded_at: '2026-12-03T10:00:00.000Z' },
});

describe('webhook rules and signatures', () => {
  it('turns transitions into notifications, watches and resets; other events into nothing', () => {
    expect(reactionsTo(transition('escalated'))).toEqual([{ do: 'reset_premature' }, { do: 'notify', kind: 'step.escalated', key: 'e1' }]);
    expect(reactionsTo(transition('awaiting_approval'))[1]).toEqual({ do: 'notify', kind: 'approval.requested', key: 'e1' });
    expect(reactionsTo(transition('verifying'))[1]).toEqual({ do: 'watch_unknown', transition_event_id: 'e1', since: '2026-12-03T10:00:00.000Z' });
    expect(reactionsTo(transition('retry_ready'))).toEqual([{ do: 'reset_premature' }]);
    expect(reactionsTo({ ...transition('escalated'), type: 'DispatchRefused' })).toEqual([]);
  });

  it('backs off by doubling, capped', () => {
    expect([1, 2, 3, 4, 5, 6].map((attempt) => retryDelayMs(attempt, 1000, 5000))).toEqual([1000, 2000, 4000, 5000, 5000, 5000]);
  });

  it('signs t.body with HMAC-SHA256 as Stripe does, and verifies against tampering, a wrong secret, age and rotation', () => {
    const body = '{"id":"dlv_1","type":"step.escalated"}';
    const header = signatureHeader('whsec_test', body, 1_764_756_000);
    // Computed independently: printf '1764756000.{"id":"dlv_1","type":"step.escalated"}' | openssl dgst -sha256 -hmac whsec_test
    expect(header).toBe('t=1764756000,v1=ce6bd58ff85c2eba2d1ff67ddaf2ae5d651668873e71e05b183e00e8dbcdb17e');
    const at = { nowSeconds: 1_764_756_010 };
    expect(verifySignature(header, body, 'whsec_test', at).ok).toBe(true);
    expect(verifySignature(header, body.replace('escalated', 'approved'), 'whsec_test', at)).toEqual({ ok: false, reason: 'no_match' });
    expect(verifySignature(header, body, 'whsec_other', at)).toEqual({ ok: false, reason: 'no_match' });
    expect(verifySignature(header, body, 'whsec_test', { nowSeconds: 1_764_756_000 + 301 })).toEqual({ ok: false, reason: 'too_old' });
    expect(verifySignature(`${header},v1=${'0'.repeat(64)}`, body, 'whsec_test', at).ok).toBe(true);
    expect(verifySignature('v1=abc', body, 'whsec_test', at)).toEqual({ ok: false, reason: 'malformed' });
  });
});
