// The inspector's Figures view: the counters of this run of listen (src/observe/figures.ts), as
// `GET /api/metrics` gives them, the same figures `wxhooks mcp`'s metrics tool answers and `--metrics`
// exposes (the percentiles read from the same buckets as Prometheus' histogram_quantile). Plain DOM, every
// value put in as text.
import { outcomeLabel } from '../delivery/outcomes.js';
import type { RunFigures } from '../observe/figures.js';

function el(tag: string, cls = '', ...children: (string | Node)[]): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  e.append(...children);
  return e;
}

function table(caption: string, rows: [string, string][]): HTMLElement {
  const t = el('table', 'kv figures');
  t.append(el('caption', '', caption));
  for (const [k, v] of rows) t.append(el('tr', '', el('th', '', k), el('td', '', v)));
  return t;
}

const ms = (v: number | null) => (v === null ? '–' : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(2)} s`);
const s = (v: number | null) => (v === null ? '–' : v < 120 ? `${v} s` : `${(v / 60).toFixed(1)} min`);

/** Draws this run's figures into `view` (asked of listen now). */
export async function showFigures(view: HTMLElement, api: (path: string) => string): Promise<void> {
  const res = await fetch(api('/api/metrics'));
  if (!res.ok) {
    view.replaceChildren(el('div', 'empty', 'This listen keeps no figures.'));
    return;
  }
  const f = (await res.json()) as RunFigures;
  const total = Object.values(f.outcomes).reduce((a, b) => a + b, 0);
  const outcomes = Object.entries(f.outcomes).sort((a, b) => b[1] - a[1]);
  const refusals = Object.entries(f.refusals).sort((a, b) => b[1] - a[1]);
  view.replaceChildren(
    el('p', 'hint', `Since ${f.since}: ${total} request${total === 1 ? '' : 's'} answered (replays apart). The same figures as listen --metrics and wxhooks mcp's metrics tool.`),
    table(
      'By outcome',
      outcomes.map(([o, n]) => [outcomeLabel(o), String(n)]),
    ),
    table('Your app (--forward-to)', [
      ['answers', String(f.app.count)],
      ...Object.entries(f.app.by_class).map(([c, n]): [string, string] => [c === 'error' ? 'no answer' : c, String(n)]),
      ['p50', ms(f.app.p50)],
      ['p95', ms(f.app.p95)],
    ]),
    table("Delivery lag (received minus the notification's created_at)", [
      ['deliveries', String(f.lag.count)],
      ['p50', s(f.lag.p50)],
      ['p95', s(f.lag.p95)],
    ]),
    ...(refusals.length
      ? [
          table(
            'Refused, by reason',
            refusals.map(([r, n]) => [r.replace(/_/g, ' '), String(n)]),
          ),
        ]
      : []),
    ...(f.late.said
      ? [
          table('Late (--watch-runs)', [
            ['said', String(f.late.said)],
            ['late now', String(f.late.now)],
          ]),
        ]
      : []),
  );
  if (!total) view.append(el('div', 'empty', 'Nothing answered yet: the figures fill in as deliveries arrive.'));
}
