import { startServer, type TestServer } from './server.js';

/** A span as an OTLP/HTTP JSON export carries it, with its attributes flattened. */
export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: string[];
  service?: string;
  links: string[];
}

/** An OTLP/HTTP receiver on 127.0.0.1 (JSON): every span posted to /v1/traces, and the raw bodies (to search them). */
export interface OtlpReceiver extends TestServer {
  spans: ReceivedSpan[];
  bodies: string[];
  /** Resolves with the spans once `match` finds what it waits for among them. */
  waitFor(match: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const plain = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const waiters = new Set<() => void>();
  const server = await startServer((req, res) => {
    bodies.push(req.body);
    const doc = req.json as {
      resourceSpans?: {
        resource?: { attributes?: { key: string; value: AnyValue }[] };
        scopeSpans: {
          spans: {
            name: string;
            traceId: string;
            spanId: string;
            parentSpanId?: string;
            kind: number;
            attributes?: { key: string; value: AnyValue }[];
            events?: { name: string }[];
            links?: { traceId: string }[];
          }[];
        }[];
      }[];
    };
    for (const rs of doc?.resourceSpans ?? []) {
      const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue;
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          spans.push({
            name: s.name,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            kind: s.kind,
            attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, plain(a.value)])),
            events: (s.events ?? []).map((e) => e.name),
            service,
            links: (s.links ?? []).map((l) => l.traceId),
          });
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
    for (const w of waiters) w();
  });
  return {
    ...server,
    spans,
    bodies,
    waitFor(match) {
      return new Promise((resolve) => {
        const look = () => {
          if (!match(spans)) return;
          waiters.delete(look);
          resolve(spans);
        };
        waiters.add(look);
        look();
      });
    },
  };
}

/** The environment that sends a door's traces to `r` (JSON, exported at once). */
export const otlpEnv = (r: { url: string }): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '50',
});

/** A Prometheus text exposition's samples: `name{labels}` → value. */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}
