import type { ChalkInstance } from 'chalk';
import type { ReceiverEvent } from '../receiver/server.js';

function size(n: number | undefined): string {
  if (n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function run(e: ReceiverEvent): string {
  const parts = [e.model, e.initialization_time?.replace(':00:00Z', ':00Z'), e.forecast_hour !== undefined ? `+${e.forecast_hour}h` : undefined];
  return parts.filter(Boolean).join(' ');
}

function forward(e: ReceiverEvent): string {
  const f = e.forward;
  if (!f) return '';
  if (f.error) return `→ app: ${f.error}`;
  return `→ app ${f.status}${f.body ? ` ${JSON.stringify(f.body.slice(0, 60))}` : ''} (${f.ms} ms)`;
}

/** One readable line per request for `listen`, with a second indented line for advice. */
export function formatEvent(e: ReceiverEvent, c: ChalkInstance): string {
  const time = c.dim(e.time.slice(11, 19));
  const status = String(e.status);
  const ids = [e.webhook_id && `webhook ${e.webhook_id}`, e.subscription_id && `sub ${e.subscription_id}`, e.trigger_id].filter(Boolean).join(' ');
  switch (e.outcome) {
    case 'accepted':
    case 'refused_by_flag': {
      const mark = e.outcome === 'accepted' ? c.green('✓') : c.yellow('!');
      const fields = [c.bold(e.type ?? '(no type)') + (e.test ? c.cyan(' test') : ''), ids, run(e), size(e.size), c.dim(e.layout ?? ''), forward(e)];
      let text = `${time} ${mark} ${status}  ${fields.filter(Boolean).join('  ')}`;
      if (e.outcome === 'refused_by_flag') text += c.yellow(`  (answered ${status} as --respond-status asks; not marked processed)`);
      if (e.pinned) text += `\n         ${c.dim(`signatures use the ${e.layout} layout; pinned for this session (pin it yourself with --scheme ${e.layout})`)}`;
      if (e.warning) text += `\n         ${c.yellow(`warning: ${e.warning}`)}`;
      if (e.saved_to) text += `\n         ${c.dim(`saved to ${e.saved_to}`)}`;
      return text;
    }
    case 'duplicate':
      return `${time} ${c.blue('↺')} ${status}  duplicate, skipped: ${e.type ?? ''} ${ids} was already processed`;
    case 'in_progress':
      return `${time} ${c.yellow('…')} ${status}  ${e.type ?? ''} ${ids} is still being processed; answered 409 so the service retries`;
    case 'forward_failed':
      return `${time} ${c.red('✗')} ${status}  ${[c.bold(e.type ?? ''), ids, run(e), size(e.size), c.dim(e.layout ?? '')].filter(Boolean).join('  ')}  ${c.red(forward(e))}\n         ${c.dim('not marked processed: the service will retry it')}`;
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

