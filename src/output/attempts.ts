import type { AttemptSummary } from '../api/emulator-client.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import { fitLine, table } from './render.js';
import type { Style } from './style.js';

/** The start of a receiver's answer, on one line: what a handler said when it refused. */
function answerStart(a: AttemptSummary): string {
  const text = a.response?.replace(/\s+/g, ' ').trim();
  return text ? ` ${JSON.stringify(printable(text.slice(0, 80)))}` : '';
}

/** What came of an attempt: the receiver's status (and the start of its answer) or why none came. */
export function attemptResult(a: AttemptSummary): string {
  if (a.outcome === 'pending') return 'still waiting for the receiver (see `wxhooks emulator deliveries`)';
  const took = a.duration_ms === undefined ? '' : ` (${a.duration_ms} ms)`;
  if (a.outcome === 'delivered') return `delivered: ${a.status}${took}`;
  return a.status !== undefined ? `failed: the receiver answered ${a.status}${answerStart(a)}${took}` : `failed: ${printable(a.error ?? 'no answer')}`;
}

/** What comes next for a failed attempt: its retry, or nothing more (a ping is never retried). */
export function attemptNext(a: AttemptSummary, now: number = Date.now()): string {
  if (a.outcome !== 'failed') return '';
  if (a.next_attempt_at) {
    const at = Date.parse(a.next_attempt_at);
    const wait = at > now ? ` (in ${formatDuration(Math.ceil((at - now) / 1000) * 1000)})` : '';
    return `retry ${a.attempt + 1} at ${a.next_attempt_at.slice(11, 19)}${wait}`;
  }
  return a.test ? 'a ping is never retried' : 'no retry left';
}

/**
 * One delivery attempt on a line, for the emulator's terminal: what matters first (when, the type, which
 * attempt, the receiver's answer or error, the next retry), the ids last (webhook, subscription,
 * trigger), so that a line cut to the terminal's width loses the ids, not the answer.
 */
export function attemptLine(a: AttemptSummary, style: Style, width?: number, now: number = Date.now()): string {
  const time = style.dim((a.started_at ?? new Date(now).toISOString()).slice(11, 19));
  const mark = a.outcome === 'delivered' ? style.green('✓') : a.outcome === 'pending' ? style.yellow('…') : style.red('✗');
  const what = `${printable(a.type ?? '?')}${a.test ? style.cyan(' ping') : ''}`;
  const result = a.outcome === 'failed' ? style.red(attemptResult(a)) : attemptResult(a);
  const next = attemptNext(a, now);
  const ids = style.dim(`webhook ${printable(a.webhook_id)} sub ${printable(a.subscription_id)} ${printable(a.trigger_id)}`);
  return fitLine(`${time} ${mark} ${what} attempt ${a.attempt}: ${result}${next ? `; ${style.dim(next)}` : ''}  ${ids}`, width);
}

/** The attempts as a table (`wxhooks emulator deliveries`): aligned on a terminal (the receiver's answer last, cut first), tab-separated when piped. */
export function attemptsTable(attempts: AttemptSummary[], tty: boolean, width?: number, now: number = Date.now()): string {
  return table(
    ['TIME', 'WEBHOOK', 'SUBSCRIPTION', 'TYPE', 'TRIGGER', 'ATTEMPT', 'RESULT', 'NEXT', 'ANSWER'],
    attempts.map((a) => [
      (a.started_at ?? '').slice(11, 19),
      a.webhook_id,
      a.subscription_id,
      `${a.type ?? ''}${a.test ? ' (ping)' : ''}`,
      a.trigger_id,
      String(a.attempt),
      `${a.outcome}${a.status !== undefined ? ` ${a.status}` : ''}${a.duration_ms !== undefined ? ` (${a.duration_ms} ms)` : ''}`,
      attemptNext(a, now) || '-',
      (a.error ?? a.response?.replace(/\s+/g, ' ').trim().slice(0, 200)) || '-',
    ]),
    tty,
    width,
  );
}
