import type { Style } from './style.js';
import type { ReceiverEvent } from '../receiver/server.js';

function size(n: number | undefined): string {
  if (n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** `text` and `part` with `sep` between them, leaving out what is empty (cheaper than [...].filter(Boolean).join(sep)). */
function add(text: string, part: string | undefined, sep: string): string {
  if (!part) return text;
  return text ? `${text}${sep}${part}` : part;
}

function run(e: ReceiverEvent): string {
  let text = add('', e.model, ' ');
  text = add(text, e.initialization_time?.replace(':00:00Z', ':00Z'), ' ');
  return e.forecast_hour !== undefined ? add(text, `+${e.forecast_hour}h`, ' ') : text;
}

function ids(e: ReceiverEvent): string {
  let text = e.webhook_id ? `webhook ${e.webhook_id}` : '';
  if (e.subscription_id) text = add(text, `sub ${e.subscription_id}`, ' ');
  return add(text, e.trigger_id, ' ');
}

/** Ids, model run, size and layout of a delivery, two spaces apart. */
function details(e: ReceiverEvent, c: Style): string {
  let text = add(ids(e), run(e), '  ');
  text = add(text, size(e.size), '  ');
  return add(text, c.dim(e.layout ?? ''), '  ');
}

function forward(e: ReceiverEvent): string {
  const f = e.forward;
  if (!f) return '';
  if (f.error) return `→ app: ${f.error}`;
  return `→ app ${f.status}${f.body ? ` ${JSON.stringify(f.body.slice(0, 60))}` : ''} (${f.ms} ms)`;
}

/** One readable line per request for `listen`, with a second indented line for advice. */
export function formatEvent(e: ReceiverEvent, c: Style): string {
  const time = c.dim(e.time.slice(11, 19));
  const status = String(e.status);
  switch (e.outcome) {
    case 'accepted':
    case 'refused_by_flag': {
      const mark = e.outcome === 'accepted' ? c.green('✓') : c.yellow('!');
      const fields = add(c.bold(e.type ?? '(no type)') + (e.test ? c.cyan(' test') : ''), details(e, c), '  ');
      let text = `${time} ${mark} ${status}  ${add(fields, forward(e), '  ')}`;
      if (e.outcome === 'refused_by_flag') text += c.yellow(`  (answered ${status} as --respond-status asks; not marked processed)`);
      if (e.pinned) text += `\n         ${c.dim(`signatures use the ${e.layout} layout; pinned for this session (pin it yourself with --scheme ${e.layout})`)}`;
      if (e.warning) text += `\n         ${c.yellow(`warning: ${e.warning}`)}`;
      if (e.saved_to) text += `\n         ${c.dim(`saved to ${e.saved_to}`)}`;
      return text;
    }
    case 'duplicate':
      return `${time} ${c.blue('↺')} ${status}  duplicate, skipped: ${e.type ?? ''} ${ids(e)} was already processed`;
    case 'in_progress':
      return `${time} ${c.yellow('…')} ${status}  ${e.type ?? ''} ${ids(e)} is still being processed; answered 409 so the service retries`;
    case 'forward_failed':
      return `${time} ${c.red('✗')} ${status}  ${add(c.bold(e.type ?? ''), details(e, c), '  ')}  ${c.red(forward(e))}\n         ${c.dim('not marked processed: the service will retry it')}`;
    case 'unverified':
    case 'bad_request':
      return `${time} ${c.red('✗')} ${status}  ${c.red(e.message ?? e.reason ?? 'rejected')}${e.size !== undefined ? c.dim(`  ${size(e.size)}`) : ''}${e.hint ? `\n         ${c.dim(e.hint)}` : ''}`;
    case 'too_large':
      return `${time} ${c.red('✗')} ${status}  body too large: ${e.message ?? ''}`;
    case 'method_not_allowed':
    case 'not_found':
      return c.dim(`${e.time.slice(11, 19)}   ${status}  ${e.method} ${e.path} (ignored)`);
    default:
      return `${time} ${c.red('✗')} ${status}  ${e.message ?? e.outcome}`;
  }
}
