import { Controller, Get, HttpCode, Inject, Logger, Optional, Post, Query, StreamableFile } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Readable } from 'node:stream';
import { RequireAccess } from '../../auth/access';
import { eventLine, footerLine, headerLine } from '../../store/log-archive-format';
import { LedgerProblem } from '@recovery-ledger/core';
import { PROJECTION_ENGINE } from '../../projection-engine/projections.module';
import type { ProjectionRunner } from '../../projection-engine/projection-runner';
import { IntegrityMonitor } from '../../integrity/integrity-monitor';
import { EVENT_STORE, type EventStore } from '../../store/event-store.port';
import { operationStream } from '../../store/stream-names';
import { CallerParam, type Caller } from '../caller';

const EXPORT_PAGE = 500;

/**
 * What only an admin key may do over HTTP (docs/contract.md §8: "admin: rebuild and export"). The export is
 * the caller's tenant's streams only, in the CLI's archive format; a rebuild recomputes the shared
 * read models from the log, changes no fact and shows nothing, so it is not scoped by tenant.
 */
@ApiTags('admin')
@Controller('v1/admin')
export class AdminController {
  private readonly logger = new Logger('Admin');

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Optional() @Inject(PROJECTION_ENGINE) private readonly engine?: ProjectionRunner,
  ) {}

  @Post('verify')
  @HttpCode(200)
  @RequireAccess('admin')
  @ApiOperation({
    summary:
      "Audit the whole log now (chains, anchored heads, the log anchor) and answer what was found in the caller's tenant; the service refuses appends to what is broken.",
  })
  @ApiOkResponse({
    description: "The audit: counts, the caller's tenant's findings, and whether the log as a whole holds.",
  })
  async verify(@CallerParam() caller: Caller) {
    const audit = await this.integrity.verify();
    const prefix = operationStream(caller.tenant, '');
    // Another tenant's streams are neither named nor counted; a fault of the log as a whole is everyone's.
    const findings = audit.findings.filter(
      (finding) => finding.stream === undefined || finding.stream.startsWith(prefix),
    );
    this.logger.log({ actor: caller.actor, tenant: caller.tenant, ok: audit.ok }, 'log verified on request');
    return {
      ok: findings.length === 0,
      log_holds: !audit.findings.some((finding) => finding.stream === undefined),
      anchored: audit.anchored,
      streams: audit.streams.filter((stream) => stream.stream.startsWith(prefix)).length,
      events: audit.streams
        .filter((stream) => stream.stream.startsWith(prefix))
        .reduce((sum, stream) => sum + stream.events, 0),
      findings: findings.map(({ stream, ...rest }) => ({
        ...rest,
        ...(stream === undefined ? {} : { operation_ref: stream.slice(prefix.length) }),
      })),
      state: this.integrity.current().state,
    };
  }

  @Post('projections/rebuild')
  @HttpCode(202)
  @RequireAccess('admin')
  @ApiOperation({
    summary: 'Rebuild projections from zero (all, or the one named); answers at once, reads catch up as it runs.',
  })
  @ApiQuery({ name: 'projection', required: false, type: String })
  @ApiResponse({ status: 202, description: 'The rebuild has started; the projections and their modes.' })
  rebuild(@CallerParam() caller: Caller, @Query('projection') projection?: string) {
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

  @Get('export')
  @RequireAccess('admin')
  @ApiOperation({
    summary:
      "The caller's tenant's events as NDJSON (header, events in log order, footer), as `recovery-ledger export` writes them.",
  })
  @ApiProduces('application/x-ndjson')
  @ApiOkResponse({
    description: 'NDJSON; an answer without its footer line was cut short.',
    schema: { type: 'string' },
  })
  async export(@CallerParam() caller: Caller): Promise<StreamableFile> {
    const prefix = operationStream(caller.tenant, '');
    // The head read first is the cut: positions are assigned at commit, in order, so the export
    // is consistent even while appends continue.
    const anchor = await this.store.logAnchor();
    const head = anchor?.position ?? (await this.store.headPosition());
    const store = this.store;
    async function* lines(): AsyncGenerator<string> {
      yield headerLine(new Date().toISOString(), head);
      const streams = new Set<string>();
      let events = 0;
      let lastPosition = 0;
      for (let after = 0; after < head;) {
        const page = (await store.readAll({ after, limit: EXPORT_PAGE, streamPrefix: prefix })).filter(
          (event) => event.position <= head,
        );
        if (page.length === 0) break;
        for (const event of page) {
          streams.add(event.stream);
          lastPosition = event.position;
          yield eventLine(event);
        }
        events += page.length;
        after = page[page.length - 1].position;
      }
      const heads = store.keepsAnchors
        ? (await store.anchoredHeads(prefix)).filter((each) => each.position <= head)
        : undefined;
      yield footerLine({
        events,
        streams: streams.size,
        last_position: lastPosition,
        ...(heads ? { heads: heads.map(({ stream, revision, hash }) => ({ stream, revision, hash })) } : {}),
        // Only when this tenant's events are the whole log: the anchor then tells of no one else.
        ...(anchor && anchor.events === events ? { log_anchor: anchor } : {}),
      });
    }
    return new StreamableFile(Readable.from(lines()), { type: 'application/x-ndjson; charset=utf-8' });
  }
}
