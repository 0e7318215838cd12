import { Inject, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { LedgerConfig } from '../config/ledger-config';
import type { LedgerMetrics } from '../observability/ledger-metrics';
import { openTimeBaseStore } from '../adapters/store.factory';
import { failureFields } from '../logging/failure-log';
import { INSTANCE_CLOCKS, InstanceClocks, loadClockSettings } from './instance-clocks';

/**
 * The production clock: ledger time on the base this boot's instances share in the store, its
 * agreement with other hosts' instances judged by heartbeats (docs/reliability.md, "Instances
 * agree on time"). A wall clock step is logged loudly and counted.
 */
export async function instanceClocks(config: LedgerConfig, metrics: LedgerMetrics): Promise<InstanceClocks> {
  const logger = new Logger('LedgerClock');
  const store = await openTimeBaseStore(config);
  let storeFailing = false;
  const clocks = await InstanceClocks.start(store, {
    settings: loadClockSettings(),
    onStep: (step) =>
      logger.warn(
        { offset_ms: step.offset_ms },
        'the wall clock stepped, or differs from the time base the instances of this host share; decisions keep following elapsed (monotonic) time, so no window opens early or late',
      ),
    onAgreementChange: (judgement) => {
      if (judgement.takeOvers === 'allowed')
        logger.log(
          { skew_ms: judgement.skewMs },
          'the clocks of the instances agree: expired leases are handed over again',
        );
      else if (judgement.reason === 'skew')
        logger.error(
          { skew_ms: judgement.skewMs, ahead: judgement.ahead?.instance_id },
          'the clocks of two instances sharing this store differ by more than the bound: no expired lease of another holder is handed over until they agree (docs/reliability.md, "Instances agree on time")',
        );
    },
    onStoreError: (what, error) => {
      if (what === 'base')
        logger.error(
          failureFields(error),
          'the time base could not be read from the store: this instance keeps its own clock, judged against the others by heartbeats',
        );
      else if (!storeFailing) logger.warn(failureFields(error), 'a clock heartbeat could not be written');
      storeFailing = what === 'heartbeat';
    },
  });
  metrics.watchClock(() => {
    const status = clocks.status();
    return {
      ...clocks.clock.status(),
      instance_skew_ms: status.skew_ms,
      take_overs_held: status.take_overs === 'held',
    };
  });
  return clocks;
}

export class InstanceClocksLifecycle implements OnApplicationShutdown {
  constructor(@Inject(INSTANCE_CLOCKS) private readonly clocks: InstanceClocks | null) {}

  async onApplicationShutdown(): Promise<void> {
    await this.clocks?.stop();
  }
}
