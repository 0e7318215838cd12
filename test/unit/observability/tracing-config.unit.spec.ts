import { tracingConfigured } from '../../../src/observability/tracing';

describe('tracing is configured by the standard OTEL_* exporter variables only', () => {
  it.each([
    [{}, false],
    [{ OTEL_SERVICE_NAME: 'ledger' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }, true],
    [{ OTEL_TRACES_EXPORTER: 'otlp' }, true],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, false],
    [{ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
  ])('%j → %s', (env, expected) => {
    expect(tracingConfigured(env as NodeJS.ProcessEnv)).toBe(expected);
  });
});
