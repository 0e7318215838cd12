# The recovery ledger service. Built in one stage with the dev dependencies (TypeScript), then
# pruned, so the runtime image carries the compiled output and production dependencies only.
# better-sqlite3 is a native module: it is installed (or compiled) here, on the runtime's own
# Debian release, and copied across rather than installed again.

FROM node:20-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
# Only what the build reads: copying the whole context would also copy a host node_modules.
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY projections ./projections
COPY schema ./schema
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    LEDGER_DATA_DIR=/data \
    PORT=3000
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/schema ./schema
# The data directory holds the embedded SQLite log, or, on EventStoreDB, the projections' cache.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 3000
CMD ["node", "dist/src/main.js"]
