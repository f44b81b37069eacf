import type { Command } from 'commander';
import { EmulatorClient, type PublishEvent, type PublishResult } from '../api/emulator-client.js';
import { line, type Act, type Context } from '../context.js';
import { UsageError } from '../errors.js';
import { attemptNext, attemptResult } from '../output/attempts.js';
import { emit } from '../output/render.js';
import { printable } from '../util/printable.js';
import { duration, hours, integer, isoTime } from '../util/parse.js';
import { latestCycle } from '../vocabulary.js';
import { valued } from '../flags/options.js';
import { serviceFor } from '../tasks/service.js';
import * as DEFAULTS from '../delivery/defaults.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('<type>', 'the subscription type to publish (such as forecast_hour.available), or "run" for a whole model run')
    .option('--model <model>', 'the model', DEFAULTS.model)
    .addOption(valued('--init-time <iso>', 'the run, such as 2026-11-21T00:00:00Z (default: the latest 6-hourly cycle)', isoTime))
    .addOption(valued('--forecast-hour <n>', 'the forecast hour (forecast_hour.available)', integer(0)))
    .option('--event-type <type>', 'events.available: atmospheric_river, heatwave, coldwave or front')
    .addOption(valued('--hours <range>', 'run: the forecast hours, such as 0-240/6 or 0-72/3,78-240/6', hours, [hours(DEFAULTS.triggerHours, '--hours'), DEFAULTS.triggerHours]))
    .addOption(valued('--skip-hours <range>', 'run: leave these hours out (a run with holes)', hours))
    .addOption(valued('--repeat-hours <range>', 'run: publish these hours twice (as a retry would)', hours))
    .option('--shuffle', 'run: publish the hours out of order')
    .addOption(valued('--interval <duration>', 'run: a pause between hours, to watch them arrive', duration, [DEFAULTS.triggerIntervalMs, `${DEFAULTS.triggerIntervalMs / 1000}s`]))
    .addHelpText(
      'after',
      `
"trigger run" publishes a model run as the service does: one forecast_hour.available per hour,
then one initialization_time.available once every hour is out.

Examples:
  $ wxhooks trigger forecast_hour.available --model wm-6 --forecast-hour 6
  $ wxhooks trigger events.available --event-type heatwave
  $ wxhooks trigger run --model wm-6 --init-time 2026-11-21T00:00:00Z --hours 0-24/6 --interval 1s
  $ wxhooks trigger run --hours 0-48/6 --skip-hours 18,36 --repeat-hours 6 --shuffle   # gaps, repeats, disorder`,
    )
    .action(act(runTrigger));
}

export interface TriggerOptions {
  model: string;
  initTime?: string;
  forecastHour?: number;
  eventType?: string;
  hours: number[];
  skipHours?: number[];
  repeatHours?: number[];
  shuffle?: boolean;
  interval: number;
}

/** The hours `trigger run` publishes, in the order it publishes them. */
export function runOrder(o: Pick<TriggerOptions, 'hours' | 'skipHours' | 'repeatHours' | 'shuffle'>, random: () => number = Math.random): number[] {
  const skip = new Set(o.skipHours ?? []);
  const kept = o.hours.filter((h) => !skip.has(h));
  const order = [...kept, ...(o.repeatHours ?? []).filter((h) => kept.includes(h))];
  if (o.shuffle) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
  }
  return order;
}

async function emulatorClient(ctx: Context): Promise<EmulatorClient> {
  const { service } = await serviceFor(ctx);
  const client = new EmulatorClient(service.http);
  await client.ensureEmulator();
  return client;
}

/** What one published event caused: a line, and a line per delivery attempt. */
function describePublish(result: PublishResult): string {
  const e = result.event;
  const where = [e.model, e.initialization_time, e.forecast_hour !== undefined ? `+${e.forecast_hour}h` : undefined, e.event_type].filter(Boolean).join(' ');
  const head = `${e.type} ${where}: ${result.notifications} notification${result.notifications === 1 ? '' : 's'}${result.trigger_id ? ` (trigger ${result.trigger_id})` : ''}`;
  return [
    head,
    ...result.deliveries.map((a) => `  webhook ${a.webhook_id} subscription ${a.subscription_id} → ${printable(a.url)}: ${attemptResult(a)}${attemptNext(a) ? `; ${attemptNext(a)}` : ''}`),
  ].join('\n');
}

export async function runTrigger(ctx: Context, type: string, opts: TriggerOptions): Promise<void> {
  if (type === 'run') {
    if (opts.forecastHour !== undefined || opts.eventType !== undefined) throw new UsageError('`trigger run` publishes every hour itself: --forecast-hour and --event-type do not apply.');
    return runTriggerRun(ctx, opts);
  }
  if (['hours', 'skipHours', 'repeatHours', 'shuffle', 'interval'].some(ctx.given)) {
    throw new UsageError('--hours, --skip-hours, --repeat-hours, --shuffle and --interval are for `trigger run`.');
  }
  const event: PublishEvent = { type, model: opts.model, initialization_time: opts.initTime, forecast_hour: opts.forecastHour, event_type: opts.eventType };
  const client = await emulatorClient(ctx);
  const result = await client.publish(event);
  emit(ctx, result, () => describePublish(result));
}

async function runTriggerRun(ctx: Context, opts: TriggerOptions): Promise<void> {
  const init = opts.initTime ?? latestCycle();
  const order = runOrder(opts);
  const client = await emulatorClient(ctx);
  const results: PublishResult[] = [];
  for (const [i, h] of order.entries()) {
    if (i > 0 && opts.interval > 0) await new Promise((r) => setTimeout(r, opts.interval));
    const r = await client.publish({ type: 'forecast_hour.available', model: opts.model, initialization_time: init, forecast_hour: h });
    results.push(r);
    if (!ctx.global.json) line(ctx.stdout, describePublish(r));
  }
  const done = await client.publish({ type: 'initialization_time.available', model: opts.model, initialization_time: init });
  results.push(done);
  emit(ctx, { model: opts.model, initialization_time: init, hours: order, events: results }, () => describePublish(done));
}
