import type { TemporaryEvent } from '../api/temporary.js';
import type { SubscriptionCheck } from '../receiver/check.js';
import type { ListenNotice } from '../tasks/listen.js';
import type { ReceiverEvent } from '../receiver/event.js';
import { claimKept } from '../store/history-limits.js';
import { outcomeLabel } from '../delivery/outcomes.js';
import type { StoreNotice } from '../delivery/store.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import { fitLine, visibleLength, wrapWords } from './render.js';
import type { Style } from './style.js';

function size(n: number | undefined): string {
  if (n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** `text` and `part` with `sep` between them, leaving out what is empty. */
function add(text: string, part: string | undefined, sep: string): string {
  if (!part) return text;
  return text ? `${text}${sep}${part}` : part;
}

/** A field of the delivery (it came from its body or headers: control characters are shown escaped). */
const field = (value: string | undefined) => (value === undefined ? undefined : printable(value));

function run(e: ReceiverEvent): string {
  let text = add('', field(e.model), ' ');
  text = add(text, field(e.initialization_time)?.replace(':00:00Z', ':00Z'), ' ');
  return e.forecast_hour !== undefined ? add(text, `+${e.forecast_hour}h`, ' ') : text;
}

function ids(e: ReceiverEvent): string {
  let text = e.webhook_id ? `webhook ${field(e.webhook_id)}` : '';
  if (e.subscription_id) text = add(text, `sub ${field(e.subscription_id)}`, ' ');
  return add(text, field(e.trigger_id), ' ');
}

const DEDUPE = { body: 'dedupe on the body trigger_id', header: 'dedupe on the Trigger-Id', hash: 'dedupe on a hash of the signed timestamp and body' };

/**
 * Ids, model run, size and layout of a delivery, two spaces apart. `drop` leaves out the least needed
 * first, to fit a narrow terminal: the dedupe note, the layout, the size, the trigger id, the webhook and
 * subscription ids (the type, the run and the answer stay).
 */
function details(e: ReceiverEvent, style: Style, drop = 0): string {
  const idsShown = drop >= 5 ? '' : drop >= 4 ? ids({ ...e, trigger_id: undefined }) : ids(e);
  let text = add(idsShown, run(e), '  ');
  if (drop < 3) text = add(text, size(e.size), '  ');
  if (drop < 2) text = add(text, style.dim(e.layout ?? ''), '  ');
  return e.dedupe_key && drop < 1 ? add(text, style.dim(`(${DEDUPE[e.dedupe_key]}: the layout does not sign the Trigger-Id)`), '  ') : text;
}

/** The most fields `details` can leave out. */
const MOST_DROPPED = 6;

function forward(e: ReceiverEvent, drop = 0): string {
  const f = e.forward;
  // --sink: where the stream put it (the broker's id; "had it" when its pair was there already)
  const sunk = e.published?.length ? `→ stream ${e.published.map((p) => (p.duplicate ? `${p.id} (had it)` : p.id)).join(', ')}` : '';
  const app = !f
    ? e.not_forwarded
      ? `→ not forwarded: ${printable(e.not_forwarded)}`
      : ''
    : f.error
      ? `→ app: ${printable(f.error)}`
      : `→ app ${f.status}${f.body && drop < MOST_DROPPED ? ` ${JSON.stringify(f.body.slice(0, 60))}` : ''} (${f.ms} ms)`;
  return sunk && app ? `${sunk}  ${app}` : sunk || app;
}

/** How a report is shown: the terminal's width (lines are fitted to it, never wrapped by the terminal), and --verbose. */
export interface EventView {
  width?: number;
  verbose?: boolean;
}

/** What `listen`'s line says past the request itself: an answer that did not reach the client. */
function unsent(e: ReceiverEvent, style: Style): string {
  return e.answer_sent === false ? style.yellow(`\n         the answer was not sent: the connection closed first (the client got nothing; its retry is a duplicate)`) : '';
}

/**
 * One readable line per request for `listen`, with indented lines for advice. On a terminal of `width`
 * columns the request's line drops its least needed fields until it fits (then is cut), and the advice is
 * wrapped at spaces, so that the terminal never breaks a line in the middle of a field.
 */
export function formatEvent(e: ReceiverEvent, style: Style, view: EventView = {}): string {
  let text = request(e, style, 0, view) + unsent(e, style);
  for (let drop = 1; view.width && drop <= MOST_DROPPED && visibleLength(text.split('\n')[0]!) > view.width; drop++) text = request(e, style, drop, view) + unsent(e, style);
  if (!view.width) return text;
  const [first, ...advice] = text.split('\n');
  return [fitLine(first!, view.width), ...advice.map((l) => wrapWords(l, view.width, ' '.repeat(l.length - l.trimStart().length)))].join('\n');
}

function request(e: ReceiverEvent, style: Style, drop = 0, view: EventView = {}): string {
  const time = style.dim(e.time.slice(11, 19));
  const status = String(e.status);
  const type = field(e.type);
  switch (e.outcome) {
    case 'accepted':
    case 'refused_by_flag': {
      const mark = e.outcome === 'accepted' ? style.green('✓') : style.yellow('!');
      const fields = add(style.bold(type ?? '(no type)') + (e.test ? style.cyan(' test') : '') + (e.catch_up ? style.cyan(' catch-up') : ''), details(e, style, drop), '  ');
      let text = `${time} ${mark} ${status}  ${add(fields, forward(e, drop), '  ')}`;
      if (e.outcome === 'refused_by_flag') text += style.yellow(`  (answered ${status} as --respond-status asks; not marked processed)`);
      // the layout pinned is a detail for those who choose one: said with --verbose
      if (e.pinned && view.verbose) text += `\n         ${style.dim(`signatures use the ${e.layout} layout; pinned for this session (pin it yourself with --scheme ${e.layout})`)}`;
      if (e.warning) text += `\n         ${style.yellow(`warning: ${e.warning}`)}`;
      if (e.saved_to) text += `\n         ${style.dim(`saved to ${printable(e.saved_to)}`)}`;
      return text;
    }
    case 'replayed':
      return `${time} ${style.cyan('↻')} ${status}  replay of ${type ?? 'a delivery'} ${ids(e)}, signed afresh (X-Wxhooks-Replay: 1)  ${forward(e)}`;
    case 'duplicate':
      if (e.stored_later) return `${time} ${style.blue('↺')} ${status}  duplicate, skipped: ${type ?? ''} ${ids(e)} was processed before; its pair is stored now (stored later)`;
      return `${time} ${style.blue('↺')} ${status}  duplicate, skipped: ${type ?? ''} ${ids(e)} was already processed`;
    case 'in_progress':
      return `${time} ${style.yellow('…')} ${status}  ${type ?? ''} ${ids(e)} is still being processed; answered 409 so the service retries`;
    case 'forward_failed':
      return `${time} ${style.red('✗')} ${status}  ${add(style.bold(type ?? ''), details(e, style, drop), '  ')}  ${style.red(forward(e, drop))}\n         ${style.dim('not marked processed: the service will retry it')}`;
    case 'sink_failed':
      return `${time} ${style.red('✗')} ${status}  ${add(style.bold(type ?? ''), ids(e), '  ')}  ${style.red(printable(e.message ?? 'a sink did not take it'))}\n         ${style.dim('not marked processed: the service will retry it')}`;
    case 'store_failed':
      return `${time} ${style.red('✗')} ${status}  ${add(style.bold(type ?? ''), ids(e), '  ')}  ${style.red(printable(e.message ?? 'the processed pair could not be stored'))}`;
    case 'unverified':
    case 'bad_request':
    case 'timed_out':
    case 'overloaded': {
      const claims = e.claimed_trigger_id ? style.dim(`  claims ${printable(claimKept(e.claimed_trigger_id))}, not verified`) : '';
      const skipped = e.diagnosis_skipped
        ? `\n         ${style.dim('not looked into further (a re-formatted body? another layout?): that runs at most 5 times a minute; `wxhooks verify` does it on a capture')}`
        : '';
      return `${time} ${style.red('✗')} ${status}  ${style.red(printable(e.message ?? e.reason ?? 'rejected'))}${e.size !== undefined ? style.dim(`  ${size(e.size)}`) : ''}${claims}${e.hint ? `\n         ${style.dim(printable(e.hint))}` : ''}${skipped}`;
    }
    case 'aborted':
      return `${time} ${style.red('✗')}   -  ${printable(e.message ?? 'the client went away')}`;
    case 'too_large':
      return `${time} ${style.red('✗')} ${status}  body too large: ${e.message ?? ''}`;
    case 'method_not_allowed':
    case 'not_found':
      return style.dim(`${e.time.slice(11, 19)}   ${status}  ${field(e.method) ?? ''} ${field(e.path) ?? ''} (ignored)`);
    default:
      return `${time} ${style.red('✗')} ${status}  ${printable(e.message ?? outcomeLabel(e.outcome))}`;
  }
}

/** A line for what happened to the temporary webhook of `listen --public-url`, or to one left over. */
export function describeTemporary(e: TemporaryEvent, style: Style): string {
  switch (e.event) {
    case 'webhook_created':
      return `Created temporary webhook ${e.webhook_id} → ${printable(e.url)}`;
    case 'webhook_deleted':
      return `Deleted temporary webhook ${e.webhook_id}.`;
    case 'webhook_not_deleted':
      return style.yellow(`warning: temporary webhook ${e.webhook_id} could not be deleted (${printable(e.reason)}). Delete it yourself: ${e.delete}`);
    case 'leftover':
      return `Left over: temporary webhook ${e.webhook_id} of listen ${e.pid} (started ${e.started}), which no longer runs. Delete it: ${e.delete} (or run with --clean)`;
    case 'leftover_deleted':
      return `Deleted webhook ${e.webhook_id}, left over by listen ${e.pid} (started ${e.started}).`;
  }
}

/** A line for what listen says of itself while it runs (with --json, the notice itself is the line). */
export function describeListenNotice(n: ListenNotice, style: Style): string {
  if ('kind' in n) return describeNotice(n);
  switch (n.event) {
    case 'store_lost':
      return style.red(`The PostgreSQL store is unreachable (${printable(n.reason ?? '?')}): deliveries are answered 503 until it is back.`);
    case 'store_restored':
      return style.green('The PostgreSQL store is back.');
    case 'sink':
      return `Publishing verified deliveries to ${n.sink} (stream ${n.stream}${n.created ? ', created now' : ''})`;
    case 'sink_lost':
      return style.red(`The sink ${n.sink} is unreachable (${printable(n.reason ?? '?')}): deliveries are answered 503 until it is back.`);
    case 'sink_restored':
      return style.green(`The sink ${n.sink} is back.`);
    case 'sink_dropped':
      return style.red(`The sink ${n.sink}: ${printable(n.reason)}.`);
    case 'secret_changed':
      return `The stored secret of webhook ${n.webhook_id} changed (re-created?): verifying with the new one from now on.`;
    case 'inspector':
      return `Inspector: ${style.bold(n.url)}`;
    case 'metrics':
      return `Metrics: ${style.bold(n.url)} (health: /healthz, ready: /readyz)`;
    case 'traces':
      return `Traces: each delivery a span, sent to ${n.url} (OTLP ${n.protocol})`;
    default:
      return describeTemporary(n, style);
  }
}

/** A line for what the processed-pairs store noticed. */
export function describeNotice(n: StoreNotice): string {
  switch (n.kind) {
    case 'clock_jump':
      return `The wall clock jumped ${formatDuration(Math.abs(n.ms))} ${n.ms > 0 ? 'forward' : 'back'}: processed pairs expire by the time that passes, not by the clock, so none was dropped for it.`;
    case 'file_replaced':
      return `The processed-pairs file ${n.file} was ${n.how} while listen ran: the ${n.pairs} pair${n.pairs === 1 ? '' : 's'} it holds were written to a new file there.`;
    case 'stored_later':
      return `${n.pairs} processed pair${n.pairs === 1 ? '' : 's'} whose write had failed ${n.pairs === 1 ? 'is' : 'are'} stored now (stored later): their retries are duplicates.`;
    case 'history_dropped':
      return `The history could not keep ${n.rows} request${n.rows === 1 ? '' : 's'} (PostgreSQL: ${printable(n.reason.slice(0, 200))}); the others written with ${n.rows === 1 ? 'it' : 'them'} are kept. Deliveries are not affected.`;
    case 'lock_taken_over':
      return `The processed-pairs file ${n.file} was left locked by process ${n.pid} (started ${n.started}), which no longer runs: taken over.`;
  }
}

/** A line (and its advice) for one subscription's check. */
export function describeCheck(c: SubscriptionCheck, style: Style): string {
  const mark = c.result === 'verified' ? style.green('✓') : style.red('✗');
  return `${mark} ${c.type} (subscription ${c.subscription_id}): ${printable(c.detail)}${c.hint ? `\n    ${style.dim(printable(c.hint))}` : ''}`;
}
