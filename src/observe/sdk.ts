import { context, propagation, trace } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import * as DEFAULTS from '../delivery/defaults.js';
import { UsageError } from '../errors.js';
import { addSensitive } from '../util/redact.js';

/**
 * The OpenTelemetry SDK of the CLI's long-running doors (`listen`, `relay serve`), loaded only when the
 * standard variables ask for traces (src/observe/tracing.ts decides, without loading anything): a tracer
 * provider with the W3C trace context, an AsyncLocalStorage context, a batch processor and the OTLP/HTTP
 * exporter of the protocol asked (http/protobuf, the default, or http/json). The variables are read from
 * the command's environment; those the SDK reads itself (OTEL_TRACES_SAMPLER, OTEL_BSP_*, …) from the
 * process's.
 */

export interface Tracing {
  /** Where spans go (the URL, never its headers). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Sends what is pending, and stops (the globals given back, so that another start can register). */
  stop(): Promise<void>;
}

/** `k=v,k2=v2` (values percent-encoded), as OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES write them. */
function pairsOf(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (text ?? '').split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    try {
      out[decodeURIComponent(part.slice(0, eq).trim())] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      // a value that is not valid percent-encoding is left out, as the SDK leaves it out
    }
  }
  return out;
}

/** The traces endpoint: the signal's own URL as given, else the base URL with /v1/traces, else the OTLP/HTTP default. */
export function tracesUrl(env: Record<string, string | undefined>): string {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT) return `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
  return DEFAULTS.otlpTracesUrl;
}

/** The protocol asked: http/protobuf (the specification's default) or http/json; gRPC is refused (exit 2), naming what to use. */
export function tracesProtocol(env: Record<string, string | undefined>): Tracing['protocol'] {
  const p = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (p === 'http/protobuf' || p === 'http/json') return p;
  throw new UsageError(`OTEL_EXPORTER_OTLP_PROTOCOL is "${p}": wxhooks sends traces over OTLP/HTTP only (http/protobuf or http/json).`, {
    hint: "Set it to http/protobuf (a collector's port 4318) or leave it unset.",
  });
}

/** A exporter that says when it could not send (once, until it sends again). */
function told(exporter: SpanExporter, url: string, warn: (text: string) => void): SpanExporter {
  let failing = false;
  return {
    export(spans: ReadableSpan[], done) {
      exporter.export(spans, (r) => {
        if (r.code !== 0 && !failing) warn(`traces could not be sent to ${url} (${r.error?.message ?? 'no answer'}); they are dropped until it answers.`);
        failing = r.code !== 0;
        done(r);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/** Starts the SDK (the variables asked for traces: src/observe/tracing.ts); `service` names this door when OTEL_SERVICE_NAME does not. */
export async function startSdk(env: Record<string, string | undefined>, o: { service: string; version: string; warn: (text: string) => void }): Promise<Tracing> {
  const protocol = tracesProtocol(env);
  const url = tracesUrl(env);
  const headers = { ...pairsOf(env.OTEL_EXPORTER_OTLP_HEADERS), ...pairsOf(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) };
  // a collector's token (Authorization, an API key header) is a secret like any other
  for (const v of Object.values(headers)) addSensitive(v.replace(/^(bearer|basic)\s+/i, ''));
  const [{ NodeTracerProvider, BatchSpanProcessor }, { resourceFromAttributes, defaultResource }, exporterModule] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const attributes = { ...pairsOf(env.OTEL_RESOURCE_ATTRIBUTES) };
  const resource = defaultResource().merge(resourceFromAttributes({ ...attributes, 'service.name': env.OTEL_SERVICE_NAME || attributes['service.name'] || o.service, 'service.version': o.version }));
  const exporter = new exporterModule.OTLPTraceExporter({ url, headers });
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(told(exporter, url, o.warn), Number.isFinite(delay) && delay > 0 ? { scheduledDelayMillis: delay } : {})],
  });
  provider.register();
  return {
    url,
    protocol,
    async stop() {
      await provider.shutdown().catch(() => undefined);
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
