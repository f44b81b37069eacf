// The inspector page: a live list of what `listen` answered (one row per delivery, its retries counted in
// it), one delivery in detail (its verification, attempts, headers, body as a tree, as text and as hex,
// your app's answer, replay, replay with changes, commands to send it again), forecasts drawn, and the runs
// seen. Plain DOM; every value from a delivery goes in as text, never as markup. Keys: ↑/↓ or j/k move,
// Enter opens, / searches, r replays. Each delivery has an address (#delivery=ID) that opens it on reload.
import './locale.js';
import uPlot from 'uplot';
import { OUTCOME_FILTERS, outcomeLabel, REFUSED_OUTCOMES } from '../delivery/outcomes.js';
import type { DeliveryRecord, FullRecord } from '../delivery/report.js';
import { compressHours, isComplete, missingHours, RUN_TYPES, type RunsView } from '../delivery/runs.js';
import type { DegreeDaysResponse, EventContextResponse, InterpolatedPointForecastResponse } from '../handler/types.js';
import { RESPONSE_TYPES } from '../vocabulary.js';
import { fromRow, type Listed } from '../receiver/listed.js';
import { ChartProblem, drawGridded, drawTrack } from './charts.js';
import { showFigures } from './figures.js';

interface Config {
  url?: string;
  forward_to?: string | null;
  /** `--forward-to TYPE=URL`: the URL of each type routed (forward_to is every other type's). */
  forward_routes?: Record<string, string>;
  /** How many deliveries the list holds: `--history`. */
  keep: number;
  expect_hours?: number[] | null;
  /** Whether a run needs its initialization_time.available to be complete (`listen --no-init-event`: no). */
  need_init?: boolean;
  /** This listen's run: another in the stream means listen restarted. */
  session: string;
  /** `listen --relay`: the relay and channel deliveries come from (what this listen refuses is kept there). */
  relay?: { url: string; channel: string } | null;
}

/** Where listen forwards, in a few words: its URL, or its routes by type (a replay goes to its type's). */
function forwardsTo(): string {
  const routed = Object.keys(config.forward_routes ?? {}).length;
  if (!routed) return config.forward_to ?? '';
  return `${routed} type${routed === 1 ? '' : 's'} routed${config.forward_to ? `, the rest to ${config.forward_to}` : ''}`;
}

/** A record: what the list has of it (Listed, from the stream), and the rest of the report when it came from the API. */
type Rec = Listed & Partial<Omit<DeliveryRecord, keyof Listed>>;
/** A record with what arrived, as the detail shows it. */
type Full = FullRecord;

const config = JSON.parse(document.getElementById('config')!.textContent!) as Config;
/** The session's token: in the page's own address, as `listen` printed it (never in the page itself). */
const token = new URLSearchParams(location.search).get('token') ?? '';
const api = (path: string) => `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;

/** An element, its class, and its children (text or elements). */
function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = '', ...children: (string | Node | undefined | false)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const c of children) if (c !== undefined && c !== false) e.append(c);
  return e;
}

function button(label: string, cls: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', cls, label);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

// ------------------------------------------------------------------ time: UTC or the browser's zone, everywhere
let zone: 'utc' | 'local' = sessionStorage.getItem('wxhooks-zone') === 'local' ? 'local' : 'utc';
const pad = (n: number, w = 2) => String(n).padStart(w, '0');
/** A time as the page shows it: `2026-11-23 14:02:05 UTC`, or in the browser's zone, labelled. */
function when(value: string | number, parts: 'time' | 'full' = 'full'): string {
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  const utc = zone === 'utc';
  const [y, mo, da, h, mi, s] = utc
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds()];
  const label = utc ? 'UTC' : (Intl.DateTimeFormat().resolvedOptions().timeZone ?? 'local');
  const time = `${pad(h)}:${pad(mi)}:${pad(s)}`;
  return parts === 'time' ? time : `${y}-${pad(mo)}-${pad(da)} ${time} ${label}`;
}

// ------------------------------------------------------------------ state
const records = new Map<number, Rec>();
/** The ids listed, oldest first: at most `config.keep` verified and the refused kept beside them, so a page left open at a thousand deliveries a second does not grow without end. */
const order: number[] = [];
/** Rows as shown: a delivery's verified attempts are one row (the newest), a refused request a row of its own. */
interface Row {
  rec: Rec;
  attempts: number;
}
let shown: Row[] = [];
let selected: number | undefined;
const filter = { type: '', outcome: '', text: '', found: undefined as Set<number> | undefined };
/** The outcomes each entry of the outcome filter shows (src/delivery/outcomes.ts). */
const filterShows = new Map(OUTCOME_FILTERS.map((f) => [f.value as string, new Set<string>(f.outcomes)]));
let paused = false;
let waiting: unknown[][] = [];
/** Records up to this id were cleared from view ("Clear"). */
let clearedTo = Number(sessionStorage.getItem(`wxhooks-cleared-${config.session}`) ?? 0);

const refusedOutcomes = new Set<string>(REFUSED_OUTCOMES);
const isRefused = (r: Listed) => r.claimed_trigger_id !== undefined || refusedOutcomes.has(r.outcome);
const groupKey = (r: Listed) => (!isRefused(r) && r.trigger_id && !r.replay_of ? `${r.trigger_id}\u0000${r.subscription_id ?? ''}` : `#${r.id}`);

// ------------------------------------------------------------------ layout
const app = document.getElementById('app')!;
const state = el('span', 'state', 'connecting…');
state.setAttribute('role', 'status');
const tabs = {
  deliveries: button('Deliveries', 'on', () => showTab('deliveries')),
  runs: button('Runs', '', () => showTab('runs')),
  figures: button('Figures', '', () => showTab('figures')),
};
tabs.deliveries.setAttribute('aria-pressed', 'true');
const zoneButton = button('', 'light small', () => {
  zone = zone === 'utc' ? 'local' : 'utc';
  sessionStorage.setItem('wxhooks-zone', zone);
  zoneButton.textContent = zone === 'utc' ? 'Times: UTC' : 'Times: local';
  redraw();
  if (current) void select(current.id, { keepScroll: true });
  if (!runsView.hidden) void showRuns();
});
zoneButton.textContent = zone === 'utc' ? 'Times: UTC' : 'Times: local';
const pauseButton = button('Pause', 'light small', () => setPaused(!paused));
const clearButton = button('Clear', 'light small', () => {
  clearedTo = order.at(-1) ?? clearedTo;
  sessionStorage.setItem(`wxhooks-cleared-${config.session}`, String(clearedTo));
  redraw();
});
const banner = el('div', 'banner');
banner.hidden = true;
banner.setAttribute('role', 'alert');
app.append(
  el(
    'header',
    '',
    el('h1', '', 'wxhooks inspector'),
    el('span', 'about', `listen on ${config.url ?? '?'}${config.relay ? ' (through the relay: what this listen refuses waits there)' : ''}${forwardsTo() ? ` → ${forwardsTo()}` : ''}`),
    el('nav', '', tabs.deliveries, tabs.runs, tabs.figures),
    el('span', 'tools', zoneButton, pauseButton, clearButton),
    state,
  ),
  banner,
);
const typeSelect = el('select', '', el('option', '', 'every type'));
typeSelect.setAttribute('aria-label', 'type');
typeSelect.options[0]!.value = '';
const outcomeSelect = el('select');
outcomeSelect.setAttribute('aria-label', 'outcome');
for (const [value, label] of <[string, string][]>[['', 'every outcome'], ...OUTCOME_FILTERS.map((f) => [f.value, f.words])]) {
  const o = el('option', '', label);
  o.value = value;
  outcomeSelect.append(o);
}
const textInput = el('input');
textInput.type = 'search';
textInput.placeholder = 'search ids, types, +12h, body text…  ( / )';
textInput.setAttribute('aria-label', 'search');
const filters = el('div', 'filters', typeSelect, outcomeSelect, textInput);
const list = el('div');
list.id = 'list';
list.setAttribute('role', 'listbox');
list.setAttribute('aria-label', 'deliveries');
list.tabIndex = 0;
const rows = el('div', 'rows');
list.append(rows);
const detail = el('section', '', el('div', 'empty', 'Deliveries appear here as they arrive. Pick one to see it whole (↑/↓ or j/k, then Enter).'));
detail.id = 'detail';
detail.setAttribute('aria-label', 'the delivery');
detail.tabIndex = -1;
const main = el('main', '', list, detail);
const runsView = el('section', 'runs');
runsView.setAttribute('aria-label', 'model runs');
runsView.hidden = true;
/** This run's counters (src/page/figures.ts). */
const figuresView = el('section', 'figures-view');
figuresView.setAttribute('aria-label', 'figures of this run');
figuresView.hidden = true;
app.append(filters, main, runsView, figuresView);

// ------------------------------------------------------------------ the list (only the rows in view are drawn)
const ROW = 30;
const knownTypes = new Set<string>();

const hours = (r: Listed) => (r.forecast_hour !== undefined ? `+${r.forecast_hour}h` : '');

function matches(r: Rec): boolean {
  if (r.id <= clearedTo) return false;
  if (filter.type && r.type !== filter.type) return false;
  const o = filter.outcome;
  if (o && !filterShows.get(o)?.has(r.outcome)) return false;
  if (filter.text) {
    const hay =
      `${r.type ?? ''} ${r.trigger_id ?? ''} ${r.claimed_trigger_id ?? ''} ${r.subscription_id ?? ''} ${r.webhook_id ?? ''} ${r.model ?? ''} ${hours(r)} ${r.message ?? ''} ${r.outcome} ${r.status}`.toLowerCase();
    if (!hay.includes(filter.text.toLowerCase()) && !filter.found?.has(r.id)) return false;
  }
  return true;
}

let drawQueued = false;
function redraw(): void {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => {
    drawQueued = false;
    const groups = new Map<string, Row>();
    shown = [];
    for (let i = order.length - 1; i >= 0; i--) {
      const r = records.get(order[i]!)!;
      if (!matches(r)) continue;
      const key = groupKey(r);
      const group = groups.get(key);
      if (group) group.attempts++;
      else {
        const row = { rec: r, attempts: 1 };
        groups.set(key, row);
        shown.push(row);
      }
    }
    rows.style.height = `${shown.length * ROW}px`;
    list.dataset.rows = String(shown.length);
    list.dataset.records = String(order.length);
    drawRows();
  });
}

/** A row's state in words (not in colour alone): the outcome's label (src/delivery/outcomes.ts), or that it is a replay or a test. */
function label(r: Rec): string {
  if (r.replay_of) return r.replay_edited ? 'replay, edited' : 'replay';
  if (r.test) return 'test';
  return outcomeLabel(r.outcome);
}

function drawRows(): void {
  const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
  const last = Math.min(shown.length, first + Math.ceil(list.clientHeight / ROW) + 10);
  rows.replaceChildren();
  for (let i = first; i < last; i++) {
    const { rec: r, attempts } = shown[i]!;
    const mark = r.outcome === 'accepted' || r.outcome === 'replayed' ? 'ok' : r.outcome === 'duplicate' ? 'dup' : r.status >= 400 || r.status === 0 ? 'bad' : 'ok';
    const ids = isRefused(r) ? (r.claimed_trigger_id ? `claims ${r.claimed_trigger_id}, not verified` : '') : [r.subscription_id && `sub ${r.subscription_id}`, r.trigger_id].filter(Boolean).join(' ');
    const row = el(
      'div',
      `row${r.id === selected ? ' selected' : ''}`,
      el('span', `status ${mark}`, r.status ? String(r.status) : '—'),
      el('span', 'meta time', when(r.time, 'time')),
      el('span', `label ${mark}`, label(r)),
      el('span', 'type', `${r.replay_of ? '↻ ' : ''}${r.type ?? r.message ?? r.outcome}`),
      el('span', 'run', [r.model, hours(r)].filter(Boolean).join(' ')),
      attempts > 1 && el('span', 'attempts', `×${attempts} attempts`),
      el('span', 'meta ids', ids),
    );
    row.style.top = `${i * ROW}px`;
    row.dataset.id = String(r.id);
    row.dataset.outcome = r.outcome;
    row.setAttribute('role', 'option');
    row.setAttribute('aria-selected', String(r.id === selected));
    row.tabIndex = -1;
    row.addEventListener('click', () => void select(r.id));
    rows.append(row);
  }
}
list.addEventListener('scroll', drawRows);

/** Moves the selection by `by` rows, keeps it in view, and opens it. */
function move(by: number): void {
  if (!shown.length) return;
  const at = shown.findIndex((row) => row.rec.id === selected);
  const next = Math.max(0, Math.min(shown.length - 1, at === -1 ? 0 : at + by));
  const top = next * ROW;
  if (top < list.scrollTop) list.scrollTop = top;
  else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
  void select(shown[next]!.rec.id);
}

list.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowDown' || e.key === 'j') move(1);
  else if (e.key === 'ArrowUp' || e.key === 'k') move(-1);
  else if (e.key === 'Enter' && selected !== undefined) {
    void select(selected);
    detail.focus();
  } else return;
  e.preventDefault();
});
document.addEventListener('keydown', (e) => {
  const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement || e.target instanceof HTMLSelectElement;
  if (typing) {
    if (e.key === 'Escape') (e.target as HTMLElement).blur(), list.focus();
    return;
  }
  if (e.key === '/') {
    e.preventDefault();
    textInput.focus();
  } else if (e.key === 'r' && replayNow) {
    e.preventDefault();
    replayNow();
  } else if ((e.key === 'j' || e.key === 'k') && document.activeElement !== list) {
    move(e.key === 'j' ? 1 : -1);
  }
});

/** Rows of the stream (src/receiver/listed.ts), into the list. */
function take(batch: unknown[][]): void {
  if (paused) {
    waiting.push(...batch);
    pauseButton.textContent = `Resume (${waiting.length} new)`;
    return;
  }
  let inOrder = true;
  let selectedGroupGrew = false;
  const currentKey = current && groupKey(current);
  for (const row of batch) {
    const r: Rec = fromRow(row);
    if (records.has(r.id)) continue;
    records.set(r.id, r);
    if (order.length && r.id < order[order.length - 1]!) inOrder = false;
    order.push(r.id);
    if (currentKey && groupKey(r) === currentKey) selectedGroupGrew = true;
    if (r.type && !knownTypes.has(r.type)) {
      knownTypes.add(r.type);
      const o = el('option', '', r.type);
      o.value = r.type;
      typeSelect.append(o);
    }
    if (!runsView.hidden && r.type !== undefined && RUN_TYPES.includes(r.type)) runsSoon();
    if (!figuresView.hidden) figuresSoon();
  }
  if (!inOrder) order.sort((a, b) => a - b); // what a reconnect filled in, or the shared store's ids committed out of order
  trim();
  redraw();
  // a new attempt of the delivery on show: the detail follows it
  if (selectedGroupGrew && current) void select(current.id, { keepScroll: true });
}

/** As listen keeps them: the last `--history` verified requests, and apart from them the last 100 refused ones. */
function trim(): void {
  let verifiedOver = -config.keep;
  let refusedOver = -100;
  for (const id of order) isRefused(records.get(id)!) ? refusedOver++ : verifiedOver++;
  if (verifiedOver <= 0 && refusedOver <= 0) return;
  const kept: number[] = [];
  for (const id of order) {
    const refused = isRefused(records.get(id)!);
    if (refused ? refusedOver-- > 0 : verifiedOver-- > 0) records.delete(id);
    else kept.push(id);
  }
  order.splice(0, order.length, ...kept);
}

function setPaused(on: boolean): void {
  paused = on;
  pauseButton.textContent = on ? 'Resume' : 'Pause';
  pauseButton.setAttribute('aria-pressed', String(on));
  if (!on && waiting.length) {
    const held = waiting;
    waiting = [];
    take(held);
  }
}

typeSelect.addEventListener('change', () => ((filter.type = typeSelect.value), redraw()));
outcomeSelect.addEventListener('change', () => ((filter.outcome = outcomeSelect.value), redraw()));
let searching: ReturnType<typeof setTimeout> | undefined;
textInput.addEventListener('input', () => {
  filter.text = textInput.value.trim();
  filter.found = undefined;
  redraw();
  // the bodies are searched by listen, which holds them
  clearTimeout(searching);
  if (filter.text.length >= 2) {
    const asked = filter.text;
    searching = setTimeout(async () => {
      const res = await fetch(api(`/api/search?q=${encodeURIComponent(asked)}`));
      if (!res.ok || asked !== filter.text) return;
      filter.found = new Set(((await res.json()) as { ids: number[] }).ids);
      redraw();
    }, 200);
  }
});

// ------------------------------------------------------------------ live: server-sent events, reconnected by the browser (Last-Event-ID)
function showBanner(text: string, action?: [string, () => void]): void {
  banner.replaceChildren(text, action ? button(action[0], 'action small', action[1]) : '');
  banner.hidden = false;
}

const events = new EventSource(api('/api/events'));
events.addEventListener('ready', (e) => {
  const data = JSON.parse((e as MessageEvent).data as string) as { session: string; rows: unknown[][] };
  if (data.session !== config.session) {
    // listen restarted: its ids begin again, so this page's list is of another run
    events.close();
    state.textContent = 'listen restarted';
    showBanner(`listen restarted (${when(Date.now())}): reload to see its deliveries${config.url ? '' : ''}.`, ['Reload', () => location.reload()]);
    return;
  }
  state.textContent = 'live';
  state.className = 'state live';
  banner.hidden = true;
  take(data.rows);
});
// a message of the stream: one row per line
events.addEventListener('deliveries', (e) => take(((e as MessageEvent).data as string).split('\n').map((line) => JSON.parse(line) as unknown[])));
events.addEventListener('error', () => {
  state.textContent = 'reconnecting…';
  state.className = 'state';
  // a listen that is gone (the browser retries) or that no longer takes this page's token (it does not)
  void fetch(api('/api/deliveries?after=999999999')).then(
    async (res) => {
      if (res.status === 403) {
        events.close();
        state.textContent = 'session over';
        showBanner("This page's session is over: listen restarted with another token. Open the link it printed.");
      }
    },
    () => showBanner('listen is not answering: this page reconnects by itself when it is back.'),
  );
});

// ------------------------------------------------------------------ one delivery
function kv(rowsOf: [string, string | Node][], cls = 'kv'): HTMLTableElement {
  const t = el('table', cls);
  for (const [k, v] of rowsOf) t.append(el('tr', '', el('th', '', k), el('td', '', v)));
  return t;
}

/** A JSON value as a tree whose branches are built when opened (a 400 × 400 grid has 160,000 leaves). */
function tree(value: unknown, key?: string): Node {
  const labelText = key === undefined ? '' : `${key}: `;
  if (value !== null && typeof value === 'object') {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value as Record<string, unknown>);
    const d = el('details');
    d.append(el('summary', '', el('span', 'k', labelText), Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`));
    let built = false;
    const build = () => {
      if (built) return;
      built = true;
      // long lists in hundreds, each opened on its own
      if (entries.length > 200) {
        for (let i = 0; i < entries.length; i += 100) {
          const part = el('details');
          part.append(el('summary', '', `${i}…${Math.min(entries.length, i + 100) - 1}`));
          part.addEventListener('toggle', () => {
            if (part.childElementCount === 1) for (const [k, v] of entries.slice(i, i + 100)) part.append(tree(v, k));
          });
          d.append(part);
        }
      } else for (const [k, v] of entries) d.append(tree(v, k));
    };
    d.addEventListener('toggle', build);
    if (entries.length <= 30) {
      d.open = true;
      build();
    }
    return d;
  }
  const cls = typeof value === 'string' ? 's' : typeof value === 'number' ? 'n' : 'b';
  return el('div', 'leaf', el('span', 'k', labelText), el('span', cls, typeof value === 'string' ? JSON.stringify(value) : String(value)));
}

let current: Full | undefined;
/** Replays the delivery on show (the `r` key), when it can be. */
let replayNow: (() => void) | undefined;
let selecting = 0;

async function select(id: number, options: { keepScroll?: boolean } = {}): Promise<void> {
  selected = id;
  if (!options.keepScroll && history.replaceState) history.replaceState(null, '', `${location.pathname}${location.search}#delivery=${id}`);
  drawRows();
  const mine = ++selecting;
  const res = await fetch(api(`/api/deliveries/${id}`));
  if (mine !== selecting) return; // another was picked meanwhile
  if (!res.ok) {
    current = undefined;
    replayNow = undefined;
    detail.replaceChildren(el('div', 'empty', ((await res.json()) as { error: string }).error));
    return;
  }
  const { record, attempts } = (await res.json()) as { record: Full; attempts: Full[] };
  const scroll = detail.scrollTop;
  showDetail(record, attempts);
  detail.scrollTop = options.keepScroll ? scroll : 0;
}

function verdict(r: Full): HTMLElement {
  const ok = !!r.layout;
  const v = el('div', `verdict ${ok ? 'ok' : 'bad'}`);
  v.dataset.verified = String(ok);
  v.append(ok ? `✓ Verified: layout ${r.layout}${r.outcome === 'duplicate' ? ' (a duplicate: skipped)' : ''}` : `✗ ${r.message ?? r.reason ?? r.outcome}`);
  if (!ok && r.claimed_trigger_id) v.append(el('div', 'hint', `It claims ${r.claimed_trigger_id}, not verified: it is no attempt of that delivery, and is never replayed.`));
  if (!ok && r.relay_kept) {
    const kept = el(
      'div',
      'relay-kept',
      `Kept at the relay: refused delivery #${r.relay_kept.seq} of channel ${r.relay_kept.channel}, out of its queue. It is not lost: it stays there until someone drops it.`,
    );
    kept.dataset.relayKept = String(r.relay_kept.seq);
    v.append(kept);
  }
  if (!ok && r.hint) v.append(el('div', 'hint', r.hint));
  return v;
}

const bodyText = (x: Full) => x.body ?? x.body_base64 ?? '';

function attemptsTable(r: Full, attempts: Full[]): HTMLElement {
  const first = attempts[0]!;
  const t = el('table', 'kv diff');
  t.append(el('tr', '', el('th', '', 'attempt'), el('th', '', 'received'), el('th', '', 'answered'), el('th', '', 'timestamp'), el('th', '', 'signature'), el('th', '', 'body')));
  attempts.forEach((a, i) => {
    // a retry is signed afresh: its timestamp and signature change as they should; its body must not
    const fresh = (value: string, base: string) => el('td', i === 0 || value === base ? '' : 'fresh', i === 0 ? value : value === base ? 'same' : `new: ${value}`);
    const sameBody = bodyText(a) === bodyText(first);
    const row = el(
      'tr',
      a.id === r.id ? 'current' : '',
      el('td', '', `${i + 1}${a.replay_of ? ' (replay)' : ''}`),
      el('td', '', when(a.time, 'time')),
      el('td', '', `${a.status} ${label(a)}`),
      fresh(a.headers['webhook-timestamp'] ?? '', first.headers['webhook-timestamp'] ?? ''),
      fresh((a.headers['webhook-signature'] ?? '').slice(0, 16), (first.headers['webhook-signature'] ?? '').slice(0, 16)),
      el('td', i === 0 || sameBody ? '' : 'changed', i === 0 ? `${a.size ?? 0} bytes` : sameBody ? 'identical' : 'different'),
    );
    row.dataset.id = String(a.id);
    row.tabIndex = 0;
    row.title = 'open this attempt';
    const open = () => void select(a.id, { keepScroll: true });
    row.addEventListener('click', open);
    row.addEventListener('keydown', (e) => e.key === 'Enter' && open());
    t.append(row);
  });
  return el('div', 'scroll', t);
}

/** What was answered, and by whom: listen's own answer, and your app's. */
function answers(r: Full): HTMLElement {
  const box = el('div', 'answers');
  const ours = `${r.status || 'nothing'} ${label(r)}${r.message && r.outcome !== 'accepted' ? `: ${r.message}` : ''}${r.answer_sent === false ? ' (not sent: the connection closed first)' : ''}`;
  box.append(kv([['listen answered', ours]]));
  if (r.forward) {
    box.append(el('h4', '', 'Your app answered'));
    const a = r.app_answer;
    const f = r.forward;
    const answerLine = el('div', 'answer', f.error ? `not answered: ${f.error} (after ${f.ms} ms)` : `${f.status} in ${f.ms} ms`);
    answerLine.dataset.status = String(f.status ?? '');
    box.append(answerLine);
    if (a) box.append(kv(Object.entries(a.headers)), el('pre', 'answer-body', a.body || '(no body)'));
  }
  return box;
}

/** The body as a tree (JSON), as its text, and as hex bytes, one at a time. */
function bodyViews(r: Full, parsed: unknown): HTMLElement {
  const box = el('div', 'bodyviews');
  const bytes = r.body_base64 !== undefined ? Uint8Array.from(atob(r.body_base64), (c) => c.charCodeAt(0)) : new TextEncoder().encode(r.body ?? '');
  const views: [string, () => Node][] = [
    ['Tree', () => (parsed !== undefined ? tree(parsed) : el('div', 'empty', 'not JSON: see the text'))],
    [
      'Text',
      () =>
        el(
          'pre',
          'raw',
          `POST ${r.path ?? '/'}\n${Object.entries(r.headers)
            .map(([k, v]) => `${k}: ${v}`)
            .join('\n')}\n\n${r.body ?? `(base64) ${r.body_base64 ?? ''}`}`,
        ),
    ],
    ['Hex', () => el('pre', 'hex', hexDump(bytes.subarray(0, 64 * 1024)) + (bytes.length > 64 * 1024 ? `\n… the first 64 KiB of ${bytes.length} bytes` : ''))],
  ];
  const bar = el('div', 'views');
  bar.setAttribute('role', 'tablist');
  const shownView = el('div', 'tree');
  const choose = (i: number) => {
    [...bar.children].forEach((b, k) => {
      b.className = k === i ? 'on' : '';
      b.setAttribute('aria-selected', String(k === i));
    });
    shownView.replaceChildren(views[i]![1]());
  };
  views.forEach(([name], i) => {
    const b = button(name, '', () => choose(i));
    b.setAttribute('role', 'tab');
    bar.append(b);
  });
  choose(0);
  box.append(bar, shownView);
  return box;
}

function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const chunk = bytes.subarray(at, at + 16);
    const hex = [...chunk].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const text = [...chunk].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${at.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join('\n');
}

/** Copies `text`, and says so on the button for a moment. */
async function copy(b: HTMLButtonElement, text: string): Promise<void> {
  const was = b.textContent;
  try {
    await navigator.clipboard.writeText(text);
    b.textContent = 'Copied ✓';
  } catch {
    b.textContent = 'Could not copy';
  }
  b.dataset.copied = 'true';
  setTimeout(() => {
    b.textContent = was;
    delete b.dataset.copied;
  }, 1500);
}

function replaySection(r: Full): HTMLElement | undefined {
  if (!r.layout || !r.body_kept) return undefined; // what did not verify is never signed again
  const box = el('div', 'replay');
  const answer = el('div', 'answer');
  answer.hidden = true;
  answer.id = 'replay-answer';
  answer.setAttribute('role', 'status');
  const send = async (edited?: string) => {
    answer.hidden = false;
    answer.textContent = 'replaying…';
    const res = await fetch(api(`/api/deliveries/${r.id}/replay`), {
      method: 'POST',
      headers: { 'x-wxhooks-token': token, 'content-type': 'application/json' },
      body: edited === undefined ? '' : JSON.stringify({ body: edited }),
    });
    const body = (await res.json()) as { status?: number; body?: string; error?: string; ms?: number };
    answer.textContent = !res.ok
      ? `not replayed: ${body.error ?? res.status}`
      : body.error
        ? `replayed, but your app could not be reached: ${body.error} (after ${body.ms ?? '?'} ms)`
        : `replayed${edited === undefined ? '' : ' with changes'}, signed afresh: your app answered ${body.status} in ${body.ms} ms ${body.body ?? ''}`;
    answer.dataset.status = String(body.status ?? '');
    answer.dataset.error = body.error ? 'true' : '';
  };
  if (forwardsTo()) {
    const replay = button('Replay to your app', 'action', () => void send());
    replay.title = 'r';
    replayNow = () => void send();
    const edit = el('textarea', 'edit');
    edit.value = r.body ?? '';
    edit.setAttribute('aria-label', 'the body to replay');
    edit.hidden = true;
    const sendEdited = button('Replay with these changes', 'action', () => void send(edit.value));
    sendEdited.hidden = true;
    const editButton = button('Edit, then replay', 'action light', () => {
      edit.hidden = sendEdited.hidden = false;
      edit.focus();
    });
    box.append(el('div', 'buttons', replay, editButton), edit, sendEdited, answer);
  } else box.append(el('div', 'hint', 'Replay goes to --forward-to: start listen with it to replay to your app.'));
  const curl = button('Copy as curl', 'action light', async () => copy(curl, (await commands()).curl));
  const sendLine = button('Copy as wxhooks send', 'action light', async () => copy(sendLine, (await commands()).send));
  const commands = async () => (await (await fetch(api(`/api/deliveries/${r.id}/commands`))).json()) as { curl: string; send: string };
  box.append(el('div', 'buttons', curl, sendLine));
  return box;
}

function showDetail(r: Full, attempts: Full[]): void {
  current = r;
  replayNow = undefined;
  detail.replaceChildren();
  detail.dataset.id = String(r.id);
  detail.append(el('h2', '', `${r.type ?? r.outcome} — ${r.status || 'no answer'}`), verdict(r));
  const ts = r.headers['webhook-timestamp'];
  const tsNumber = ts && /^\d+$/.test(ts) ? Number(ts) * (ts.length > 11 ? 1 : 1000) : undefined;
  detail.append(
    kv(
      [
        ['received', when(r.time)],
        ['from', r.peer ?? '?'],
        ['signed at', tsNumber ? `${when(tsNumber)} (Webhook-Timestamp ${ts})` : (ts ?? '—')],
        ['size', `${r.size ?? 0} bytes${r.body_kept < (r.size ?? 0) ? `, the first ${r.body_kept} kept` : ''}`],
        ...(r.trigger_id ? ([['delivery', `${r.trigger_id}${r.subscription_id ? `, subscription ${r.subscription_id}` : ''}`]] as [string, string][]) : []),
        ...(r.model ? ([['run', `${r.model} ${r.initialization_time ? when(r.initialization_time) : ''} ${hours(r)}`]] as [string, string][]) : []),
      ],
      'kv facts',
    ),
  );
  detail.append(el('h3', '', 'Answers'), answers(r));
  if (attempts.length > 1) detail.append(el('h3', '', `Attempts of this delivery (${attempts.length})`), attemptsTable(r, attempts));
  const replay = replaySection(r);
  if (replay) detail.append(el('h3', '', 'Send it again'), replay);
  let parsed: unknown;
  if (r.body !== undefined) {
    try {
      parsed = JSON.parse(r.body);
    } catch {
      parsed = undefined;
    }
  }
  const response = (parsed as { data?: { response?: unknown } } | undefined)?.data?.response;
  if (response && typeof response === 'object') detail.append(el('h3', '', 'The forecast'), drawResponse(response as Record<string, unknown>));
  detail.append(el('h3', '', 'Headers'), kv(Object.entries(r.headers)));
  const copyBody = button('Copy body', 'action light', () => void copy(copyBody, r.body ?? r.body_base64 ?? ''));
  const cut = r.size !== undefined && r.body_kept < r.size ? ` (the first ${r.body_kept} of ${r.size} bytes)` : '';
  detail.append(el('h3', '', `Body${cut}`), copyBody, bodyViews(r, parsed));
}

// ------------------------------------------------------------------ forecasts drawn (a chart that cannot be drawn says why, in one line)
const seconds = (t: string) => Date.parse(t) / 1000;
/** uPlot's axes and legend in the page's zone. */
const tzDate = (ts: number) => (zone === 'utc' ? uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC') : new Date(ts * 1000));
const legendTime = (_u: uPlot, v: number | null) => (v == null ? '—' : when(v * 1000));

function drawResponse(response: Record<string, unknown>): HTMLElement {
  const box = el('div', 'chart');
  const type = String(response.type ?? '');
  box.dataset.chart = type;
  const started = performance.now();
  try {
    drawInto(box, type, response);
  } catch (err) {
    box.replaceChildren(
      el('div', 'hint chart-problem', `This ${type || 'response'} is not drawn: ${err instanceof ChartProblem ? err.message : `it could not be (${(err as Error).message})`}. Its body is below.`),
    );
    box.dataset.problem = 'true';
  }
  box.dataset.ms = String(Math.round(performance.now() - started));
  return box;
}

function drawInto(box: HTMLElement, type: string, response: Record<string, unknown>): void {
  const width = Math.min(560, Math.max(260, detail.clientWidth - 40));
  if (type === 'gridded') {
    const grid = drawGridded(response);
    box.append(grid);
    if (grid.dataset.note) box.append(el('div', 'hint', grid.dataset.note));
    let n = 0;
    for (const row of response.values as unknown[][]) n += row.length;
    box.dataset.cells = String(n);
    return;
  }
  if (type === 'tropical_cyclones' || type === 'tropical_cyclone_track') {
    box.append(drawTrack(response.cyclones, (t) => when(t).slice(5, 16)));
    box.dataset.points = String((response.cyclones as { track: unknown[] }[]).reduce((n, c) => n + c.track.length, 0));
    return;
  }
  if (type === 'interpolated_point_forecast') {
    if (!Array.isArray(response.points) || !response.points.length) throw new ChartProblem('no points to draw');
    const points = response.points as InterpolatedPointForecastResponse['points'];
    if (!points.every((p) => Array.isArray(p.series))) throw new ChartProblem('a point has no series');
    const variables = [...new Set(points.flatMap((p) => p.series.flatMap((s) => Object.keys(s).filter((k) => k !== 'valid_time'))))];
    for (const variable of variables) {
      const x = points[0]!.series.map((s) => seconds(String(s.valid_time)));
      const data = [x, ...points.map((p) => p.series.map((s) => Number(s[variable])))] as uPlot.AlignedData;
      const holder = el('div', '', el('div', 'hint', variable));
      holder.dataset.variable = variable;
      box.append(holder);
      new uPlot(
        {
          width,
          height: 160,
          tzDate,
          legend: { live: false },
          series: [{ value: legendTime }, ...points.map((p, i) => ({ label: `${p.lat},${p.lon}`, stroke: ['#3559b5', '#b42318', '#1f7a45', '#b54708'][i % 4] }))],
        },
        data,
        holder,
      );
    }
    box.dataset.series = String(variables.length);
    return;
  }
  if (type === 'degree_days') {
    if (!Array.isArray(response.days) || !response.days.length) throw new ChartProblem('no days to draw');
    const days = response.days as DegreeDaysResponse['days'];
    // two bars a day, side by side (not on top of each other), on an axis of days with half a day either side
    const x = days.map((d) => seconds(`${d.date}T12:00:00Z`));
    const heating = uPlot.paths.bars!({ size: [0.35, 50], align: -1 });
    const cooling = uPlot.paths.bars!({ size: [0.35, 50], align: 1 });
    new uPlot(
      {
        width,
        height: 180,
        tzDate,
        legend: { live: false },
        scales: { x: { time: true, range: (_u, min, max) => [min - 43_200, max + 43_200] } },
        axes: [{ space: 60, incrs: [86_400] }, {}],
        series: [
          { value: legendTime },
          { label: 'heating degree days', fill: '#b4231899', stroke: '#b42318', paths: heating },
          { label: 'cooling degree days', fill: '#3559b599', stroke: '#3559b5', paths: cooling },
        ],
      },
      [x, days.map((d) => d.heating_degree_days), days.map((d) => d.cooling_degree_days)] as uPlot.AlignedData,
      box,
    );
    box.dataset.bars = String(days.length);
    return;
  }
  if (type === 'event_context') {
    if (!Array.isArray(response.locations)) throw new ChartProblem('no locations');
    const locations = response.locations as EventContextResponse['locations'];
    box.append(kv(locations.map((l) => [`${l.lat}, ${l.lon}`, `${l.affected ? 'affected' : 'not affected'}, intensity ${l.intensity ?? '?'}`])));
    box.dataset.items = String(locations.length);
    return;
  }
  throw new ChartProblem(`wxhooks draws ${RESPONSE_TYPES.join(', ')}, not "${type}"`);
}

// ------------------------------------------------------------------ runs: for each run, which forecast hours arrived, against those expected (the core's rules)
const needInit = config.need_init !== false;

let runsTimer: ReturnType<typeof setTimeout> | undefined;
const runsSoon = () => {
  clearTimeout(runsTimer);
  runsTimer = setTimeout(() => void showRuns(), 300);
};

async function showRuns(): Promise<void> {
  const res = await fetch(api('/api/runs'));
  const { runs, tests, expect_hours, late = [] } = (await res.json()) as RunsView & { expect_hours: number[] | null };
  const expected = expect_hours ?? config.expect_hours ?? undefined;
  runsView.replaceChildren(
    el(
      'p',
      'hint',
      expected
        ? `A run is complete when it has ${compressHours(expected)}${needInit ? ' and its initialization_time.available' : ''} (as listen --until-run counts it).`
        : 'The hours a run should have are not known here: start listen with --until-run … --expect-hours 0-240/6 to have them checked. Each run shows the hours that came.',
    ),
  );
  if (tests) runsView.append(el('p', 'hint', tests === 1 ? '1 test delivery (a ping) is left out of the runs.' : `${tests} test deliveries (pings) are left out of the runs.`));
  // listen --watch-runs: what the forecast API says is out, for longer than --late-after, and has not arrived
  if (late.length) {
    const list = el('ul', 'late');
    for (const l of late)
      list.append(
        el(
          'li',
          '',
          `${l.model} ${when(l.initialization_time)}${l.forecast_hour !== undefined ? ` +${l.forecast_hour}h` : ''} (${l.type}): available since ${when(l.created_at, 'time')}, ${duration(l.late_ms)} ago, not delivered`,
        ),
      );
    runsView.append(el('p', 'state open', `${late.length} late (listen --watch-runs):`), list);
  }
  if (!runs.length) runsView.append(el('div', 'empty', 'No model run yet: runs appear as forecast_hour.available deliveries arrive.'));
  for (const run of [...runs, ...lateOnly(runs, late)]) {
    const have = new Set(run.hours);
    const lags = new Map((run.lags ?? []).map((x) => [x.forecast_hour, x.lag_ms]));
    const lateHours = new Set(late.filter((l) => l.model === run.model && l.initialization_time === run.initialization_time && l.forecast_hour !== undefined).map((l) => l.forecast_hour!));
    const missing = expected ? missingHours(have, expected) : [];
    const extra = expected ? run.hours.filter((h) => !expected.includes(h)) : [];
    const cells = el('div', 'cells');
    for (const h of [...new Set([...(expected ?? run.hours), ...lateHours])].sort((a, b) => a - b)) {
      const cell = el('span', `cell${have.has(h) ? ' in' : lateHours.has(h) ? ' late' : ' missing'}`, `+${h}`);
      const lag = lags.get(h);
      cell.title = `+${h}h ${have.has(h) ? `arrived${lag !== undefined ? ` ${duration(lag)} after it was made (its delivery lag)` : ''}` : lateHours.has(h) ? 'late: out, and not delivered' : 'missing'}`;
      if (lag !== undefined) cell.dataset.lagMs = String(lag);
      cells.append(cell);
    }
    for (const h of extra) cells.append(el('span', 'cell in extra', `+${h}`));
    const complete = expected ? isComplete(missing, run.init_event, needInit) : undefined;
    const verdictText =
      complete === true
        ? 'complete'
        : complete === false
          ? [missing.length ? `missing ${compressHours(missing)}` : '', needInit && !run.init_event ? 'no initialization_time.available yet' : ''].filter(Boolean).join('; ')
          : run.init_event
            ? 'the service says it is complete (initialization_time.available came)'
            : 'no initialization_time.available yet';
    const box = el(
      'div',
      'run',
      el('strong', '', `${run.model} ${when(run.initialization_time)}`),
      ` ${run.hours.length} hour${run.hours.length === 1 ? '' : 's'}: `,
      el('span', `state ${complete === true ? 'done' : complete === false ? 'open' : ''}`, verdictText),
      cells,
    );
    if (run.lags?.length) {
      const slowest = run.lags.reduce((a, b) => (b.lag_ms > a.lag_ms ? b : a));
      box.append(el('div', 'hint', `delivery lag: median ${duration(median(run.lags.map((x) => x.lag_ms)))}, slowest +${slowest.forecast_hour}h ${duration(slowest.lag_ms)}`));
    }
    box.dataset.run = `${run.model}@${run.initialization_time}`;
    box.dataset.complete = String(complete ?? '');
    runsView.append(box);
  }
}

/** Runs the forecast API says have late hours, of which nothing arrived yet: shown with their late hours. */
function lateOnly(runs: RunsView['runs'], late: NonNullable<RunsView['late']>): RunsView['runs'] {
  const known = new Set(runs.map((r) => `${r.model}@${r.initialization_time}`));
  const out = new Map<string, RunsView['runs'][number]>();
  for (const l of late) {
    const key = `${l.model}@${l.initialization_time}`;
    if (!known.has(key) && l.forecast_hour !== undefined) out.set(key, { model: l.model, initialization_time: l.initialization_time, hours: [], init_event: false });
  }
  return [...out.values()];
}

/** A time span in a few characters: 850 ms, 12 s, 3.5 min, 2.1 h. */
function duration(ms: number): string {
  const a = Math.abs(ms);
  const text = a < 1000 ? `${Math.round(a)} ms` : a < 60_000 ? `${Math.round(a / 1000)} s` : a < 3_600_000 ? `${+(a / 60_000).toFixed(1)} min` : `${+(a / 3_600_000).toFixed(1)} h`;
  return ms < 0 ? `-${text}` : text;
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

let figuresTimer: ReturnType<typeof setTimeout> | undefined;
const figuresSoon = () => {
  clearTimeout(figuresTimer);
  figuresTimer = setTimeout(() => void showFigures(figuresView, api), 300);
};

function showTab(which: 'deliveries' | 'runs' | 'figures'): void {
  for (const [name, b] of Object.entries(tabs)) {
    b.className = name === which ? 'on' : '';
    b.setAttribute('aria-pressed', String(name === which));
  }
  main.hidden = filters.hidden = which !== 'deliveries';
  runsView.hidden = which !== 'runs';
  figuresView.hidden = which !== 'figures';
  if (which === 'runs') void showRuns();
  if (which === 'figures') void showFigures(figuresView, api);
}

// ------------------------------------------------------------------ a delivery's own address opens it
const linked = /#delivery=(\d+)/.exec(location.hash);
if (linked) void select(Number(linked[1]), { keepScroll: true });
