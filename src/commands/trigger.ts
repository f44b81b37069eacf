import type { Command } from 'commander';
import type { Act } from '../cli.js';
import type { AttemptSummary, PublishEvent, PublishResult } from '../api/emulator-client.js';
import { line, type Context } from '../context.js';
import { UsageError } from '../errors.js';
import { isoSeconds, latestCycle } from '../signing/payload.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('<type>', 'the subscription type to publish (such as forecast_hour.available), or "run" for a whole model run')
    .option('--model <model>', 'the model', 'wm-6')
    .option('--init-time <iso>', 'the run, such as 2026-11-21T00:00:00Z (default: the latest 6-hourly cycle)')
    .option('--forecast-hour <n>', 'the forecast hour (forecast_hour.available)')
    .option('--event-type <type>', 'events.available: atmospheric_river, heatwave, coldwave or front')
    .option('--hours <spec>', 'run: the forecast hours, FROM-TO/STEP, FROM-TO or a list (default 0-24/6)')
    .option('--interval <duration>', 'run: a pause between hours, to watch them arrive (default 0s)')
    .addHelpText(
      'after',
      `
"trigger run" publishes a model run as the service does: one forecast_hour.available per hour,
then one initialization_time.available once every hour is out.

Examples:
  $ wxhooks trigger forecast_hour.available --model wm-6 --forecast-hour 6
  $ wxhooks trigger events.available --event-type heatwave
  $ wxhooks trigger run --model wm-6 --init-time 2026-11-21T00:00:00Z --hours 0-24/6 --interval 1s`,
    )
    .action(act(runTrigger));
}

function checkInit(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const t = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(t)) throw new UsageError(`--init-time must be an ISO 8601 time such as 2026-11-21T00:00:00Z, not "${text}".`);
  return isoSeconds(t);
}

/** `0-24/6` → 0,6,12,18,24; `0-3` → 0,1,2,3; `0,6,12` as given. */
export function parseHours(spec: string): number[] {
  const range = /^(\d+)-(\d+)(?:\/(\d+))?$/.exec(spec.trim());
  let hours: number[];
  if (range) {
    const [from, to, step] = [Number(range[1]), Number(range[2]), Number(range[3] ?? 1)];
    if (step < 1 || to < from) throw new UsageError(`--hours "${spec}": FROM must not exceed TO, and STEP must be at least 1.`);
    hours = [];
    for (let h = from; h <= to; h += step) hours.push(h);
  } else if (/^\d+(,\d+)*$/.test(spec.trim())) {
    hours = spec.split(',').map(Number);
  } else {
    throw new UsageError(`--hours must be FROM-TO/STEP (0-24/6), FROM-TO or a list (0,6,12), not "${spec}".`);
  }
  if (hours.length > 1000) throw new UsageError('--hours names more than 1000 hours.');
  return hours;
}

async function emulatorClient(ctx: Context) {
  const { serviceFor } = await import('./shared.js');
  const { EmulatorClient } = await import('../api/emulator-client.js');
  const { service } = await serviceFor(ctx);
  const client = new EmulatorClient(service.http);
  await client.ensureEmulator();
  return client;
}

function describeAttempt(a: AttemptSummary): string {
  if (a.outcome === 'pending') return `  webhook ${a.webhook_id} subscription ${a.subscription_id} → ${a.url}: still waiting for the receiver (see \`GET /emulator/v1/deliveries\`)`;
  const what = a.outcome === 'delivered' ? `delivered (${a.status})` : a.status !== undefined ? `failed: the receiver answered ${a.status}` : `failed: ${a.error}`;
  const retry = a.next_attempt_at ? `; retry at ${a.next_attempt_at.slice(11, 19)}` : '';
  return `  webhook ${a.webhook_id} subscription ${a.subscription_id} → ${a.url}: ${what} in ${a.duration_ms} ms${retry}`;
}

async function report(ctx: Context, result: PublishResult): Promise<void> {
  const e = result.event;
  const where = [e.model, e.initialization_time, e.forecast_hour !== undefined ? `+${e.forecast_hour}h` : undefined, e.event_type].filter(Boolean).join(' ');
  line(ctx.stdout, `${e.type} ${where}: ${result.notifications} notification${result.notifications === 1 ? '' : 's'}${result.trigger_id ? ` (trigger ${result.trigger_id})` : ''}`);
  for (const a of result.deliveries) line(ctx.stdout, describeAttempt(a));
}

export interface TriggerOptions {
  model: string;
  initTime?: string;
  forecastHour?: string;
  eventType?: string;
  hours?: string;
  interval?: string;
}

export async function runTrigger(ctx: Context, type: string, opts: TriggerOptions): Promise<void> {
  if (type === 'run') {
    if (opts.forecastHour !== undefined || opts.eventType !== undefined) throw new UsageError('`trigger run` publishes every hour itself: --forecast-hour and --event-type do not apply.');
    return runTriggerRun(ctx, opts);
  }
  if (opts.hours !== undefined || opts.interval !== undefined) throw new UsageError('--hours and --interval are for `trigger run`.');
  if (opts.forecastHour !== undefined && !/^\d+$/.test(opts.forecastHour)) throw new UsageError(`--forecast-hour must be a whole number, not "${opts.forecastHour}".`);
  const event: PublishEvent = {
    type,
    model: opts.model,
    initialization_time: checkInit(opts.initTime),
    forecast_hour: opts.forecastHour === undefined ? undefined : Number(opts.forecastHour),
    event_type: opts.eventType,
  };
  const client = await emulatorClient(ctx);
  const result = await client.publish(event);
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(ctx.stdout, result);
  } else await report(ctx, result);
}

async function runTriggerRun(ctx: Context, opts: TriggerOptions): Promise<void> {
  const { parseDuration } = await import('../util/duration.js');
  const hours = parseHours(opts.hours ?? '0-24/6');
  const interval = parseDuration(opts.interval ?? '0s', '--interval');
  const init = checkInit(opts.initTime) ?? latestCycle();
  const client = await emulatorClient(ctx);
  const results: PublishResult[] = [];
  for (const [i, h] of hours.entries()) {
    if (i > 0 && interval > 0) await new Promise((r) => setTimeout(r, interval));
    const r = await client.publish({ type: 'forecast_hour.available', model: opts.model, initialization_time: init, forecast_hour: h });
    results.push(r);
    if (!ctx.global.json) await report(ctx, r);
  }
  const done = await client.publish({ type: 'initialization_time.available', model: opts.model, initialization_time: init });
  results.push(done);
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(ctx.stdout, { model: opts.model, initialization_time: init, hours, events: results });
  } else await report(ctx, done);
}
