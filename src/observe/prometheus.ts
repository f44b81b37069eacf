import type { Series } from './series.js';

/**
 * The series (src/observe/series.ts) in Prometheus' text format, through prom-client's registry (its
 * exposition, its escaping, and the process's own metrics: CPU, memory, the event loop's delay, garbage
 * collection). prom-client is loaded here only, and this module only with `--metrics` (or a consumer's
 * `metrics` option): a plain `listen` never loads it.
 */

export interface Exposition {
  contentType: string;
  text(): Promise<string>;
}

interface PromValue {
  labels: Record<string, string>;
  value: number;
  metricName?: string;
}

const zip = (names: readonly string[], values: readonly string[]): Record<string, string> => Object.fromEntries(names.map((n, i) => [n, values[i] ?? '']));

/** One series' values, as prom-client's registry writes them (a histogram's as its cumulative buckets, sum and count). */
async function valuesOf(s: Series): Promise<PromValue[]> {
  switch (s.type) {
    case 'counter':
      return s.entries().map(([l, value]) => ({ labels: zip(s.labels, l), value }));
    case 'gauge':
      return (await s.read()).map(([l, value]) => ({ labels: zip(s.labels, l), value }));
    case 'histogram': {
      const out: PromValue[] = [];
      for (const [l, b] of s.entries()) {
        const labels = zip(s.labels, l);
        let cumulative = 0;
        b.bounds.forEach((bound, i) => {
          cumulative += b.counts[i]!;
          out.push({ metricName: `${s.name}_bucket`, labels: { ...labels, le: String(bound) }, value: cumulative });
        });
        out.push({ metricName: `${s.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: b.count });
        out.push({ metricName: `${s.name}_sum`, labels, value: b.sum });
        out.push({ metricName: `${s.name}_count`, labels, value: b.count });
      }
      return out;
    }
  }
}

/**
 * A registry of the door's series (asked for at each scrape: a door's series may be added as it runs),
 * `wxhooks_info{door, version}`, and the process's metrics.
 */
export async function exposition(door: string, version: string, series: () => Series[]): Promise<Exposition> {
  const imported = (await import('prom-client')) as typeof import('prom-client') & { default?: typeof import('prom-client') };
  const prom = imported.default ?? imported;
  const registry = new prom.Registry();
  prom.collectDefaultMetrics({ register: registry });
  new prom.Gauge({ name: 'wxhooks_info', help: 'This wxhooks: which door, and its version (always 1).', labelNames: ['door', 'version'], registers: [registry] }).set({ door, version }, 1);
  const known = new Set<string>();
  const register = () => {
    for (const s of series()) {
      if (known.has(s.name)) continue;
      known.add(s.name);
      registry.registerMetric({
        name: s.name,
        help: s.help,
        type: s.type,
        get: async () => ({ name: s.name, help: s.help, type: s.type, values: await valuesOf(s), aggregator: 'sum' }),
      } as unknown as Parameters<typeof registry.registerMetric>[0]);
    }
  };
  return {
    contentType: registry.contentType,
    async text() {
      register();
      return registry.metrics();
    },
  };
}
