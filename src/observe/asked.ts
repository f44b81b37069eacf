import { UsageError } from '../errors.js';

/**
 * Whether the standard OpenTelemetry variables ask for traces, read without loading anything of
 * OpenTelemetry (a door that is not asked loads neither its SDK nor its API): an OTLP endpoint, or
 * OTEL_TRACES_EXPORTER=otlp; not with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. An exporter
 * wxhooks does not bring (console, zipkin, …) is a usage error (exit 2) that says which it brings.
 */
export function tracesAsked(env: Record<string, string | undefined>): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (exporters.includes('none')) return false;
  const other = exporters.find((e) => e !== 'otlp');
  if (other !== undefined) {
    throw new UsageError(`OTEL_TRACES_EXPORTER is "${other}": wxhooks sends traces with OTLP only.`, {
      hint: 'Set OTEL_TRACES_EXPORTER=otlp (or leave it unset) and OTEL_EXPORTER_OTLP_ENDPOINT to your collector; none turns traces off.',
    });
  }
  return exporters.includes('otlp') || Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}
