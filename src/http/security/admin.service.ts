import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LedgerProblem } from '@recovery-ledger/core';
import { PROJECTION_ENGINE } from '../../projection-engine/projections.module';
import type { ProjectionRunner } from '../../projection-engine/projection-runner';
import { IntegrityMonitor } from '../../integrity/integrity-monitor';
import { EVENT_STORE, type EventStore } from '../../store/event-store.port';
import { archiveCut, archiveLines } from '../../store/log-archive-format';
import { operationStream } from '../../store/stream-names';
import type { Caller } from '../caller';

/**
 * What only an admin key may do over HTTP (docs/contract.md §8: "admin: rebuild and export"), each
 * scoped as it must be: the audit and the export show the caller's tenant's streams only; a rebuild
 * recomputes the shared read models from the log, changes no fact and shows nothing, so it is not
 * scoped by tenant.
 */
@Injectable()
export class AdminService {
  private readonly logger = new Logger('Admin');

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Optional() @Inject(PROJECTION_ENGINE) private readonly engine?: ProjectionRunner,
  ) {}

  /** The whole log audited now; the answer names only the caller's tenant's findings. */
  async verify(caller: Caller) {
    const audit = await this.integrity.verify();
    const prefix = operationStream(caller.tenant, '');
    // Another tenant's streams are neither named nor counted; a fault of the log as a whole is everyone's.
    const findings = audit.findings.filter(
      (finding) => finding.stream === undefined || finding.stream.startsWith(prefix),
    );
    this.logger.log({ actor: caller.actor, tenant: caller.tenant, ok: audit.ok }, 'log verified on request');
    const tenantStreams = audit.streams.filter((stream) => stream.stream.startsWith(prefix));
    return {
      ok: findings.length === 0,
      log_holds: !audit.findings.some((finding) => finding.stream === undefined),
      anchored: audit.anchored,
      streams: tenantStreams.length,
      events: tenantStreams.reduce((sum, stream) => sum + stream.events, 0),
      findings: findings.map(({ stream, ...rest }) => ({
        ...rest,
        ...(stream === undefined ? {} : { operation_ref: stream.slice(prefix.length) }),
      })),
      state: this.integrity.current().state,
    };
  }

  /** Starts a rebuild of the named projection (`-` or `_` spelled) or of all, and answers at once. */
  rebuild(caller: Caller, projection: string | undefined) {
    if (!this.engine) throw new LedgerProblem('NOT_FOUND', 'this service runs no projections');
    // On a rolled-back log a read model ahead of it is the evidence: not rebuilt down to the old log.
    const refusal = this.integrity.writeRefusal();
    if (refusal) throw refusal;
    const engine = this.engine;
    const known = engine.status().projections.map((status) => status.name);
    const wanted = projection === undefined ? known : [String(projection).replace(/-/g, '_')];
    if (!wanted.every((name) => known.includes(name))) {
      throw new LedgerProblem('BAD_REQUEST', `projection must be one of ${known.join(', ')}`, { field: 'projection' });
    }
    // Not awaited: a rebuild of a long log outlasts any request; readers see its progress in
    // as_of_position and readiness, and a second request joins the rebuild already running.
    engine
      .rebuild(wanted)
      .catch((error: unknown) => this.logger.error({ err: error, projections: wanted }, 'rebuild failed'));
    this.logger.log({ actor: caller.actor, tenant: caller.tenant, projections: wanted }, 'rebuild started');
    return { rebuilding: wanted, projections: engine.status().projections };
  }

  /**
   * The caller's tenant's streams in the CLI's archive format, line by line as they are read; the
   * cut is read first, so a store that cannot answer is a typed error, not an answer cut short.
   */
  async export(caller: Caller): Promise<AsyncGenerator<string>> {
    return archiveLines(this.store, await archiveCut(this.store), {
      streamPrefix: operationStream(caller.tenant, ''),
      exportedAt: new Date().toISOString(),
    });
  }
}
