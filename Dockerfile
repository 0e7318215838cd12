# The recovery ledger service. Built in one stage with the dev dependencies (TypeScript), then
# pruned, so the runtime image carries the compiled output and production dependencies only.
# better-sqlite3 is a native module: it is installed (or compiled) here, on the runtime's own
# Debian release and Node major, and copied across rather than installed again.
#
# The runtime stage's COPY lines are the whole file set the service reads at run time; a test
# (test/e2e/runtime-image-layout.e2e.spec.ts) assembles exactly those paths, with production
# dependencies only, and starts the service from them on both stores. Add a line here whenever
# the service starts reading another file. Another (test/e2e/docker-build-stage.e2e.spec.ts)
# assembles the build stage from its own COPY lines, runs its RUN lines, and starts the runtime
# stage made from that output with docker-compose.yml's environment.

FROM node:24-bookworm AS build
WORKDIR /app
# npm ci installs the workspaces too, so each one's package.json comes before it.
COPY package.json package-lock.json ./
COPY packages/core/package.json ./packages/core/
COPY projections/package.json ./projections/
COPY packages/client/package.json ./packages/client/
COPY packages/mcp-gateway/package.json ./packages/mcp-gateway/
COPY packages/agent-frameworks/package.json ./packages/agent-frameworks/
RUN npm ci
# Only what the build reads: copying the whole context would also copy a host node_modules.
# scripts/: `npm run build` is `node scripts/build.cjs`, which builds packages/ first, then src/.
COPY tsconfig.base.json tsconfig.json tsconfig.build.json nest-cli.json ./
COPY scripts ./scripts
COPY packages ./packages
COPY projections ./projections
COPY src ./src
COPY schema ./schema
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    LEDGER_DATA_DIR=/data \
    PORT=3000
WORKDIR /app
# package.json: the package root the UI assets are found from, and the version /docs reports.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The workspaces the service loads (the core, the projections, and the MCP gateway with the client for the CLI):
# node_modules/@recovery-ledger/* are links into this folder.
COPY --from=build /app/packages ./packages
COPY --from=build /app/projections ./projections
# The incident page's files, read from the source folder at start-up (src/ui/ui-assets.ts).
COPY --from=build /app/src/ui/assets ./src/ui/assets
COPY --from=build /app/schema ./schema
# The data directory holds the embedded SQLite log, or, on EventStoreDB, the projections' cache.
RUN mkdir -p /data && chown node:node /data
# The image's own unprivileged user (uid 1000), never root.
USER node
EXPOSE 3000
# Liveness only: a store outage must not mark a healthy process for replacement. The slim image has
# no curl; Node's own fetch asks the loopback address, which answers whatever HOST is bound.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/src/main.js"]
