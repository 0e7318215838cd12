import { Logger, type FactoryProvider } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { FailureLog } from '../logging/failure-log';
import { CLOCK, type Clock } from '../shared/clock';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { CheckpointKeeper } from './checkpoint-keeper';
import { CpuShare } from './cpu-share';
import { IntegrityMonitor, ledgerEventProblem } from './integrity-monitor';
import { verifiedCheckpointFile } from './verified-checkpoint';

/**
 * The verified checkpoint beside the data (docs/reliability.md, "Start-up without a full pass"):
 * what a check finds broken is refused at once through the integrity monitor, and said loudly.
 */
export const checkpointKeeperProvider: FactoryProvider<CheckpointKeeper> = {
  provide: CheckpointKeeper,
  inject: [EVENT_STORE, CONFIG, IntegrityMonitor, CLOCK],
  useFactory: (store: EventStore, config: LedgerConfig, integrity: IntegrityMonitor, clock: Clock) => {
    const logger = new Logger('Integrity');
    // Kept at every interval: a store that is down must not write a stack each time.
    const failures = new FailureLog(logger);
    // The running service's checks share the audit's bound: a share of one core.
    const pace = new CpuShare(config.auditCpuShare);
    return new CheckpointKeeper({
      store,
      file: verifiedCheckpointFile(config.dataDir),
      anchorKey: config.anchorKey,
      checkEvent: ledgerEventProblem,
      now: () => clock.now(),
      intervalMs: config.checkpointIntervalMs,
      pause: () => pace.pause(),
      onFindings: (findings, when) => {
        integrity.refuse(findings);
        logger.error(
          { findings: findings.length, kinds: [...new Set(findings.map((finding) => finding.kind))], check: when },
          'THE LOG FAILED VERIFICATION after its last verified checkpoint: the broken streams are refused; run `recovery-ledger verify` for the details',
        );
      },
      onError: (error) => failures.failed(error, 'the verified checkpoint could not be kept'),
    });
  },
};
