import type { Context } from '../context.js';
import { UsageError } from '../errors.js';
import { emit, table } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';

/**
 * `deliveries list --sink URL`: what a sink's stream holds (its newest 100 messages), each consumer group
 * and what it has pending, and the dead letters. The reading is src/sinks/; this renders it.
 */
export async function runDeliveriesSink(ctx: Context, url: string, o: { type?: string; outcome?: string; dir?: string; store?: string; webhook?: string; secretEnv?: string }): Promise<void> {
  if (o.dir !== undefined || o.store !== undefined || o.outcome !== undefined || o.webhook !== undefined || o.secretEnv !== undefined) {
    throw new UsageError('--sink reads a stream; --dir, --store, --outcome, --webhook and --secret-env are about saved deliveries: give one or the other.');
  }
  const { readSink } = await import('../sinks/index.js');
  const view = await readSink(url);
  if (o.type !== undefined) view.deliveries = view.deliveries.filter((e) => e.type === o.type);
  emit(ctx, view, () => {
    const tty = Boolean(ctx.stdout.isTTY);
    const style = styleFor(ctx, ctx.stdout);
    const s = view.stream;
    const head = `${style.bold(printable(s.name))} (${printable(view.sink)}): ${s.messages} message${s.messages === 1 ? '' : 's'}${s.first ? `, ids ${s.first} to ${s.last}` : ''}; dead letters in ${printable(view.dead_letters.name)}: ${view.dead_letters.messages}`;
    const parts = [head, ''];
    if (view.groups.length) {
      const redis = view.broker === 'redis';
      parts.push(
        table(
          ['GROUP', 'PENDING', 'WAITING', redis ? 'WORKERS' : 'REDELIVERED'],
          view.groups.map((g) => [g.name, String(g.pending), g.waiting === null ? '?' : String(g.waiting), String((redis ? g.consumers : g.redelivered) ?? '')]),
          tty,
        ),
      );
      const pending = view.groups.flatMap((g) => (g.pending_entries ?? []).map((p) => [p.id, g.name, p.consumer, formatDuration(p.idle_ms), String(p.deliveries)]));
      if (pending.length) parts.push(table(['PENDING ID', 'GROUP', 'WORKER', 'IDLE', 'DELIVERIES'], pending, tty));
    } else {
      parts.push(style.dim('No consumer group reads it yet.\n'));
    }
    if (!view.deliveries.length) parts.push(style.dim(`No message${o.type ? ` of type ${printable(o.type)}` : ''} in it.`));
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
  });
}
