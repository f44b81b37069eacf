// The inspector page: a live list of what `listen` answered, one delivery in detail (its verification,
// its attempts, headers, body, the app's answer, a replay), forecasts drawn, and the runs seen. Plain DOM;
// every value from a delivery goes in as text, never as markup.
import './locale.js';
import uPlot from 'uplot';
import { fromRow, type Listed } from '../receiver/listed.js';
import { drawGridded, drawTrack } from './charts.js';

interface Config {
  url?: string;
  forward_to?: string | null;
  /** How many deliveries the list holds: `--history`. */
  keep: number;
}

/** A record: what the list has of it (Listed), and what comes when one is picked. */
interface Rec extends Listed {
  initialization_time?: string;
  forecast_hour?: number;
  size?: number;
  layout?: string;
  reason?: string;
  hint?: string;
  forward?: { ok: boolean; status?: number; body?: string; error?: string; ms: number };
  test?: boolean;
  ms?: number;
}

interface Full extends Rec {
  headers: Record<string, string>;
  body?: string;
  body_base64?: string;
  body_kept: number;
}

const config = JSON.parse(document.getElementById('config')!.textContent!) as Config;
/** The session's token: in the page's own address, as `listen` printed it (never in the page itself). */
const token = new URLSearchParams(location.search).get('token') ?? '';
const api = (path: string) => `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;

/** An element, its class, and its children (text or elements). */
function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = '', ...children: (string | Node | undefined)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const c of children) if (c !== undefined) e.append(c);
  return e;
}

// ------------------------------------------------------------------ state
const records = new Map<number, Rec>();
/** The ids listed, oldest first: at most `config.keep` of them (the history's size), so that a page left open at a thousand deliveries a second does not grow without end. */
const order: number[] = [];
let shown: Rec[] = [];
let selected: number | undefined;
const filter = { type: '', outcome: '', text: '' };

// ------------------------------------------------------------------ layout
const app = document.getElementById('app')!;
const state = el('span', 'state', 'connecting…');
const tabs = { deliveries: el('button', 'on', 'Deliveries'), runs: el('button', '', 'Runs') };
app.append(el('header', '', el('h1', '', 'wxhooks inspector'), el('span', 'about', `listen on ${config.url ?? '?'}${config.forward_to ? ` → ${config.forward_to}` : ''}`), el('nav', '', tabs.deliveries, tabs.runs), state));
const typeSelect = el('select', '', el('option', '', ''));
typeSelect.setAttribute('aria-label', 'type');
typeSelect.options[0]!.textContent = 'every type';
typeSelect.options[0]!.value = '';
const outcomeSelect = el('select');
outcomeSelect.setAttribute('aria-label', 'outcome');
for (const [value, label] of <[string, string][]>[
  ['', 'every outcome'],
  ['accepted', 'accepted'],
  ['duplicate', 'duplicate'],
  ['refused', 'refused (4xx/5xx)'],
  ['forward_failed', 'your app failed'],
]) {
  const o = el('option', '', label);
  o.value = value;
  outcomeSelect.append(o);
}
const textInput = el('input');
textInput.placeholder = 'search ids, types, messages…';
textInput.setAttribute('aria-label', 'search');
const filters = el('div', 'filters', typeSelect, outcomeSelect, textInput);
const list = el('div');
list.id = 'list';
const rows = el('div', 'rows');
list.append(rows);
const detail = el('div', '', el('div', 'empty', 'Deliveries appear here as they arrive. Pick one to see it whole.'));
detail.id = 'detail';
const main = el('main', '', list, detail);
const runsView = el('div', 'runs');
runsView.hidden = true;
app.append(filters, main, runsView);

// ------------------------------------------------------------------ the list (only the rows in view are drawn)
const ROW = 28;
const knownTypes = new Set<string>();

function matches(r: Rec): boolean {
  if (filter.type && r.type !== filter.type) return false;
  if (filter.outcome === 'refused' ? !(r.status >= 400 || r.status === 0) : filter.outcome && r.outcome !== filter.outcome) return false;
  if (filter.text) {
    const hay = `${r.type ?? ''} ${r.trigger_id ?? ''} ${r.subscription_id ?? ''} ${r.webhook_id ?? ''} ${r.model ?? ''} ${r.message ?? ''} ${r.outcome} ${r.status}`.toLowerCase();
    if (!hay.includes(filter.text.toLowerCase())) return false;
  }
  return true;
}

let drawQueued = false;
function redraw(): void {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => {
    drawQueued = false;
    shown = [];
    for (let i = order.length - 1; i >= 0; i--) {
      const r = records.get(order[i]!)!;
      if (matches(r)) shown.push(r);
    }
    rows.style.height = `${shown.length * ROW}px`;
    drawRows();
  });
}

function drawRows(): void {
  const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
  const last = Math.min(shown.length, first + Math.ceil(list.clientHeight / ROW) + 10);
  rows.replaceChildren();
  for (let i = first; i < last; i++) {
    const r = shown[i]!;
    const mark = r.outcome === 'accepted' ? 'ok' : r.outcome === 'duplicate' ? 'dup' : r.status >= 400 || r.status === 0 ? 'bad' : 'ok';
    const row = el(
      'div',
      `row${r.id === selected ? ' selected' : ''}`,
      el('span', `status ${mark}`, r.status ? String(r.status) : '—'),
      el('span', 'meta', r.time.slice(11, 19)),
      el('span', 'type', `${r.replay_of ? 'replay ↻ ' : ''}${r.type ?? r.message ?? r.outcome}`),
      el('span', 'meta', [r.subscription_id && `sub ${r.subscription_id}`, r.trigger_id, r.claimed_trigger_id && `claims ${r.claimed_trigger_id}, not verified`].filter(Boolean).join(' ')),
    );
    row.style.top = `${i * ROW}px`;
    row.dataset.id = String(r.id);
    row.dataset.outcome = r.outcome;
    row.addEventListener('click', () => select(r.id));
    rows.append(row);
  }
}
list.addEventListener('scroll', drawRows);

/** Rows of the stream (src/receiver/listed.ts), into the list. */
function take(batch: unknown[][]): void {
  let inOrder = true;
  for (const row of batch) {
    const r: Rec = fromRow(row);
    if (records.has(r.id)) continue;
    records.set(r.id, r);
    if (order.length && r.id < order[order.length - 1]!) inOrder = false;
    order.push(r.id);
    if (r.type && !knownTypes.has(r.type)) {
      knownTypes.add(r.type);
      const o = el('option', '', r.type);
      o.value = r.type;
      typeSelect.append(o);
    }
  }
  if (!inOrder) order.sort((a, b) => a - b); // what a reconnect filled in, or the shared store's ids committed out of order
  const over = order.length - config.keep;
  if (over > 0) for (const id of order.splice(0, over)) records.delete(id);
  redraw();
}

typeSelect.addEventListener('change', () => ((filter.type = typeSelect.value), redraw()));
outcomeSelect.addEventListener('change', () => ((filter.outcome = outcomeSelect.value), redraw()));
textInput.addEventListener('input', () => ((filter.text = textInput.value.trim()), redraw()));

// ------------------------------------------------------------------ live: server-sent events, reconnected by the browser (Last-Event-ID)
const events = new EventSource(api('/api/events'));
events.addEventListener('ready', (e) => {
  state.textContent = 'live';
  state.className = 'state live';
  take((JSON.parse((e as MessageEvent).data) as { rows: unknown[][] }).rows);
});
// a message of the stream: one row per line
events.addEventListener('deliveries', (e) => take(((e as MessageEvent).data as string).split('\n').map((line) => JSON.parse(line) as unknown[])));
events.addEventListener('error', () => {
  state.textContent = 'reconnecting…';
  state.className = 'state';
});

// ------------------------------------------------------------------ one delivery
function kv(rowsOf: [string, string][]): HTMLTableElement {
  const t = el('table', 'kv');
  for (const [k, v] of rowsOf) t.append(el('tr', '', el('td', '', k), el('td', '', v)));
  return t;
}

function tree(value: unknown, key?: string): Node {
  const label = key === undefined ? '' : `${key}: `;
  if (value !== null && typeof value === 'object') {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value as Record<string, unknown>);
    const d = el('details');
    d.open = entries.length <= 30;
    d.append(el('summary', '', el('span', 'k', label), Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`));
    for (const [k, v] of entries) d.append(tree(v, k));
    return d;
  }
  const cls = typeof value === 'string' ? 's' : typeof value === 'number' ? 'n' : 'b';
  return el('div', 'leaf', el('span', 'k', label), el('span', cls, typeof value === 'string' ? JSON.stringify(value) : String(value)));
}

async function select(id: number): Promise<void> {
  selected = id;
  drawRows();
  const res = await fetch(api(`/api/deliveries/${id}`));
  if (!res.ok) {
    detail.replaceChildren(el('div', 'empty', ((await res.json()) as { error: string }).error));
    return;
  }
  const { record, attempts } = (await res.json()) as { record: Full; attempts: Full[] };
  showDetail(record, attempts);
}

function verdict(r: Full): HTMLElement {
  const ok = ['accepted', 'duplicate', 'in_progress', 'refused_by_flag', 'forward_failed', 'store_failed'].includes(r.outcome) && !!r.layout;
  const v = el('div', `verdict ${ok ? 'ok' : 'bad'}`);
  v.dataset.verified = String(ok);
  v.append(ok ? `✓ Verified: layout ${r.layout}${r.outcome === 'duplicate' ? ' (a duplicate: skipped)' : ''}` : `✗ ${r.message ?? r.reason ?? r.outcome}`);
  if (!ok && r.hint) v.append(el('div', 'hint', r.hint));
  return v;
}

function attemptsTable(attempts: Full[]): HTMLElement {
  const first = attempts[0]!;
  const t = el('table', 'kv diff');
  t.append(el('tr', '', el('td', '', 'attempt'), el('td', '', 'answered'), el('td', '', 'timestamp'), el('td', '', 'signature'), el('td', '', 'body')));
  attempts.forEach((a, i) => {
    const cell = (value: string, base: string) => {
      const td = el('td', i === 0 ? '' : value === base ? 'same' : 'changed', i === 0 ? value : value === base ? 'same' : `changed: ${value}`);
      return td;
    };
    const bodyOf = (x: Full) => x.body ?? x.body_base64 ?? '';
    const row = el(
      'tr',
      '',
      el('td', '', `${i + 1}. ${a.time.slice(11, 23)}${a.replay_of ? ' (replay)' : ''}`),
      el('td', '', `${a.status} ${a.outcome}`),
      cell(a.headers['webhook-timestamp'] ?? '', first.headers['webhook-timestamp'] ?? ''),
      cell((a.headers['webhook-signature'] ?? '').slice(0, 24), (first.headers['webhook-signature'] ?? '').slice(0, 24)),
      el('td', i === 0 ? '' : bodyOf(a) === bodyOf(first) ? 'same' : 'changed', i === 0 ? `${a.size ?? 0} bytes` : bodyOf(a) === bodyOf(first) ? 'identical' : 'different'),
    );
    t.append(row);
  });
  return t;
}

function showDetail(r: Full, attempts: Full[]): void {
  detail.replaceChildren();
  detail.dataset.id = String(r.id);
  detail.append(el('h2', '', `${r.type ?? r.outcome} — ${r.status || 'no answer'}`), verdict(r));
  if (attempts.length > 1) detail.append(el('h3', '', `Attempts of this delivery (${attempts.length})`), attemptsTable(attempts));
  if (r.forward) detail.append(el('h3', '', 'Your app answered'), el('div', 'answer', r.forward.error ?? `${r.forward.status} in ${r.forward.ms} ms ${r.forward.body ?? ''}`));
  if (config.forward_to && r.body_kept && r.layout) {
    const button = el('button', 'action', 'Replay to your app');
    const answer = el('div', 'answer');
    answer.hidden = true;
    answer.id = 'replay-answer';
    button.addEventListener('click', async () => {
      button.disabled = true;
      const res = await fetch(`/api/deliveries/${r.id}/replay`, { method: 'POST', headers: { 'x-wxhooks-token': token } });
      const body = (await res.json()) as { status?: number; body?: string; error?: string; ms?: number };
      answer.hidden = false;
      answer.textContent = res.ok ? `replayed, signed afresh: your app answered ${body.status ?? '?'} in ${body.ms ?? '?'} ms ${body.body ?? ''}` : `not replayed: ${body.error ?? res.status}`;
      answer.dataset.status = String(body.status ?? '');
      button.disabled = false;
    });
    detail.append(el('h3', '', 'Replay'), button, answer);
  }
  let parsed: unknown;
  if (r.body !== undefined) {
    try {
      parsed = JSON.parse(r.body);
    } catch {
      parsed = undefined;
    }
  }
  const response = (parsed as { data?: { response?: unknown } } | undefined)?.data?.response;
  if (response && typeof response === 'object') {
    const chart = drawResponse(response as Record<string, unknown>);
    if (chart) detail.append(el('h3', '', 'The forecast'), chart);
  }
  detail.append(el('h3', '', 'Headers'), kv(Object.entries(r.headers)));
  const copy = el('button', 'action light', 'Copy body');
  copy.addEventListener('click', () => void navigator.clipboard?.writeText(r.body ?? r.body_base64 ?? ''));
  const cut = r.size !== undefined && r.body_kept < r.size ? ` (the first ${r.body_kept} of ${r.size} bytes)` : '';
  detail.append(el('h3', '', `Body${cut}`), copy);
  const body = el('div', 'tree');
  body.append(parsed !== undefined ? tree(parsed) : el('pre', '', r.body ?? (r.body_base64 ? `(base64) ${r.body_base64}` : '(none)')));
  detail.append(body);
}

// ------------------------------------------------------------------ forecasts drawn
function timeAxis(times: string[]): number[] {
  return times.map((t) => Date.parse(t) / 1000);
}

function drawResponse(response: Record<string, unknown>): HTMLElement | undefined {
  const box = el('div', 'chart');
  const type = String(response.type ?? '');
  box.dataset.chart = type;
  if (type === 'gridded' && Array.isArray(response.values)) {
    box.append(drawGridded(response as never));
    box.dataset.cells = String((response.values as number[][]).flat().length);
    return box;
  }
  if ((type === 'tropical_cyclones' || type === 'tropical_cyclone_track') && Array.isArray(response.cyclones)) {
    const cyclones = response.cyclones as { name?: string; track: { lat: number; lon: number; valid_time: string }[] }[];
    box.append(drawTrack(cyclones));
    box.dataset.points = String(cyclones.reduce((n, c) => n + c.track.length, 0));
    return box;
  }
  if (type === 'interpolated_point_forecast' && Array.isArray(response.points)) {
    const points = response.points as { lat: number; lon: number; series: Record<string, number | string>[] }[];
    const variables = [...new Set(points.flatMap((p) => p.series.flatMap((s) => Object.keys(s).filter((k) => k !== 'valid_time'))))];
    for (const variable of variables) {
      const x = timeAxis(points[0]!.series.map((s) => String(s.valid_time)));
      const data = [x, ...points.map((p) => p.series.map((s) => Number(s[variable])))] as uPlot.AlignedData;
      const holder = el('div', '', el('div', 'hint', variable));
      holder.dataset.variable = variable;
      box.append(holder);
      new uPlot({ width: 520, height: 160, series: [{}, ...points.map((p, i) => ({ label: `${p.lat},${p.lon}`, stroke: ['#3559b5', '#b42318', '#1f7a45', '#b54708'][i % 4] }))] }, data, holder);
    }
    box.dataset.series = String(variables.length);
    return box;
  }
  if (type === 'degree_days' && Array.isArray(response.days)) {
    const days = response.days as { date: string; heating_degree_days: number; cooling_degree_days: number }[];
    const bars = uPlot.paths.bars!({ size: [0.6, 40] });
    const data = [timeAxis(days.map((d) => `${d.date}T00:00:00Z`)), days.map((d) => d.heating_degree_days), days.map((d) => d.cooling_degree_days)] as uPlot.AlignedData;
    new uPlot(
      {
        width: 520,
        height: 180,
        series: [{}, { label: 'heating degree days', fill: '#b4231899', stroke: '#b42318', paths: bars }, { label: 'cooling degree days', fill: '#3559b599', stroke: '#3559b5', paths: bars }],
      },
      data,
      box,
    );
    box.dataset.bars = String(days.length);
    return box;
  }
  if (type === 'event_context' && Array.isArray(response.locations)) {
    const locations = response.locations as { lat: number; lon: number; affected?: boolean; intensity?: number }[];
    box.append(kv(locations.map((l) => [`${l.lat}, ${l.lon}`, `${l.affected ? 'affected' : 'not affected'}, intensity ${l.intensity ?? '?'}`])));
    box.dataset.items = String(locations.length);
    return box;
  }
  return undefined;
}

// ------------------------------------------------------------------ runs: for each run, which forecast hours arrived
async function showRuns(): Promise<void> {
  const res = await fetch(api('/api/runs'));
  const { runs } = (await res.json()) as { runs: { model: string; initialization_time: string; hours: number[]; init_event: boolean }[] };
  runsView.replaceChildren();
  if (!runs.length) runsView.append(el('div', 'empty', 'No model run yet: runs appear as forecast_hour.available deliveries arrive.'));
  for (const run of runs) {
    const step = run.hours.length > 1 ? run.hours.slice(1).reduce((g, h, i) => gcd(g, h - run.hours[i]!), 0) || 1 : 1;
    const last = run.hours.at(-1) ?? 0;
    const cells = el('div', 'cells');
    for (let h = 0; h <= last; h += step) {
      const cell = el('span', `cell${run.hours.includes(h) ? ' in' : ''}`, `+${h}`);
      cell.title = `+${h}h ${run.hours.includes(h) ? 'arrived' : 'missing'}`;
      cells.append(cell);
    }
    cells.append(el('span', `cell init${run.init_event ? ' in' : ''}`, run.init_event ? 'run complete' : 'no init event yet'));
    const box = el('div', 'run', el('strong', '', `${run.model} ${run.initialization_time}`), ` ${run.hours.length} hours`, cells);
    box.dataset.run = `${run.model}@${run.initialization_time}`;
    runsView.append(box);
  }
}
const gcd = (a: number, b: number): number => (b === 0 ? Math.abs(a) : gcd(b, a % b));

tabs.deliveries.addEventListener('click', () => {
  tabs.deliveries.className = 'on';
  tabs.runs.className = '';
  main.hidden = filters.hidden = false;
  runsView.hidden = true;
});
tabs.runs.addEventListener('click', () => {
  tabs.runs.className = 'on';
  tabs.deliveries.className = '';
  main.hidden = filters.hidden = true;
  runsView.hidden = false;
  void showRuns();
});
