import type { Context } from '../context.js';
import type { SinkView } from '../sinks/view.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import { table } from './render.js';
import { styleFor } from './style.js';

/**
 * `deliveries list --sink URL` as text: the stream, each consumer group and what it has pending, the
 * dead letters, the newest messages. Whatever the broker: a column a broker does not fill (Redis has no
 * count of redeliveries, JetStream no list of workers) is left out.
 */
export function sinkViewText(ctx: Context, view: SinkView, type?: string): string {
  const tty = Boolean(ctx.stdout.isTTY);
  const style = styleFor(ctx, ctx.stdout);
  const s = view.stream;
  const head = `${style.bold(printable(s.name))} (${printable(view.sink)}): ${s.messages} message${s.messages === 1 ? '' : 's'}${s.first ? `, ids ${s.first} to ${s.last}` : ''}; dead letters in ${printable(view.dead_letters.name)}: ${view.dead_letters.messages}`;
  const parts = [head, ''];
  if (view.groups.length) {
    const columns = [
      ['WORKERS', (g: SinkView['groups'][number]) => g.consumers],
      ['REDELIVERED', (g: SinkView['groups'][number]) => g.redelivered],
    ] as const;
    const shown = columns.filter(([, value]) => view.groups.some((g) => value(g) !== undefined));
    parts.push(
      table(
        ['GROUP', 'PENDING', 'WAITING', ...shown.map(([name]) => name)],
        view.groups.map((g) => [g.name, String(g.pending), g.waiting === null ? '?' : String(g.waiting), ...shown.map(([, value]) => String(value(g) ?? ''))]),
        tty,
      ),
    );
    const pending = view.groups.flatMap((g) => (g.pending_entries ?? []).map((p) => [p.id, g.name, p.consumer, formatDuration(p.idle_ms), String(p.deliveries)]));
    if (pending.length) parts.push(table(['PENDING ID', 'GROUP', 'WORKER', 'IDLE', 'DELIVERIES'], pending, tty));
  } else {
    parts.push(style.dim('No consumer group reads it yet.\n'));
  }
  if (!view.deliveries.length) parts.push(style.dim(`No message${type ? ` of type ${printable(type)}` : ''} in it.`));
  else {
    parts.push(
      table(
        ['ID', 'RECEIVED', 'TYPE', 'TRIGGER', 'SUB', 'LAYOUT', 'SIZE'],
        view.deliveries.map((e) =>
          e.not_ours
            ? [e.id, '', `not ours: ${e.not_ours}`, '', '', '', String(e.size)]
            : [e.id, e.received_at ?? '', e.type ?? '', e.trigger_id ?? '', e.subscription_id ?? '', e.layout ?? '', String(e.size)],
        ),
        tty,
      ),
    );
  }
  return parts.join('\n');
}
