import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { printable } from '../util/printable.js';
import { emit, table } from '../output/render.js';
import { skippedLines } from '../receiver/saved.js';
import { listStored, sourceOf, unverifiedLine, whereOf } from '../receiver/stored.js';
import { compressHours, progressOf, RunTracker, runView } from '../delivery/runs.js';
import { duration, hours, timeLimit } from '../util/parse.js';
import { msDefault, repeatable, valued } from '../flags/options.js';
import { deliverySourceOptions, secretSourceOptions } from '../flags/sources.js';
import { resolveSecrets } from '../tasks/secrets.js';
import { serviceFor } from '../tasks/service.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { InterruptedError, UsageError } from '../errors.js';
import { watchLateRuns } from '../output/late.js';
import { styleFor } from '../output/style.js';
import { fileLookup, pgLookup, reconcileWebhook } from '../receiver/reconcile.js';
import { configDir } from '../store/paths.js';
import { storeKind } from '../store/store-url.js';
import { formatDuration } from '../util/duration.js';

export function register(cmd: Command, act: Act): void {
  secretSourceOptions(deliverySourceOptions(cmd), 'with --dir, check saved files without the mark with')
    .addOption(valued('--expect-hours <range>', 'the forecast hours a run should have, such as 0-240/6: what is missing is listed', hours))
    .addHelpText(
      'after',
      `
Each model run seen (model and initialisation time): the forecast hours present, those missing against
--expect-hours, and whether its initialization_time.available came. For a job that starts after the fact.
From a --save-dir folder, or from the history that receivers sharing a PostgreSQL store keep (--store).
Only verified deliveries count: from a folder, the files that carry the mark of the listen that saved them
with this store folder, or whose own signature verifies with the secret given (--webhook, --secret-env).
It reports, and exits 0 whatever it finds, an incomplete run included (\`--json\` says \`"complete"\` for
each). To wait for a run and fail when it is not complete in time, use \`listen --until-run --within\`.

Examples:
  $ wxhooks listen --webhook 7 --save-dir ./deliveries &
  $ wxhooks runs --dir ./deliveries --expect-hours 0-240/6
  $ wxhooks runs --dir ./deliveries --expect-hours 0-240/6 --json | jq '.runs[] | select(.complete)'
  $ wxhooks runs --store "$WXHOOKS_STORE_URL" --expect-hours 0-240/6`,
    )
    .action(act(runRuns));

  cmd
    .command('watch')
    .description("say, as it happens, which forecast hours of the webhook's subscriptions are late: available (the forecast API says) for longer than --late-after, and not delivered")
    .addOption(valued('--watch-interval <duration>', 'how often the forecast API is asked', timeLimit, msDefault(DEFAULTS.watchIntervalMs)))
    .addOption(valued('--late-after <duration>', 'how long an available hour may take to arrive', duration, msDefault(DEFAULTS.lateAfterMs)))
    .option('--on-late <cmd>', 'a shell command run for each late notification, its details in WXHOOKS_LATE_* (WXHOOKS_LATE_JSON: all of them)')
    .addOption(repeatable('--model <model>', 'a model a subscription without a model filter receives (repeatable)'))
    .addHelpText(
      'after',
      `
It takes --webhook ID (the webhook whose subscriptions are watched), and --store and --store-schema when
listen keeps its pairs in PostgreSQL, as \`runs\` does.

What arrived is what the listens of this webhook handed over (its store: the file of \`listen --webhook ID\`,
or a postgres store), read without getting in their way. Each late notification is said once: a line, or
with --json a {"event":"late_hour", ...} line. \`listen --watch-runs\` does the same inside a listen, and
shows them in its inspector's Runs view. Ctrl-C to stop.

Examples:
  $ wxhooks runs watch --webhook 7
  $ wxhooks runs watch --webhook 7 --late-after 20m --on-late 'notify-send "late: $WXHOOKS_LATE_MODEL +$WXHOOKS_LATE_FORECAST_HOUR h"'`,
    )
    // --webhook, --store and --store-schema are read where commander puts them: on `runs` itself
    .action(act((ctx, o: RunsWatchOptions) => runRunsWatch(ctx, { ...(cmd.opts() as Pick<RunsWatchOptions, 'webhook' | 'store' | 'storeSchema'>), ...o }), { longRunning: true }));
}

export interface RunsWatchOptions {
  webhook?: string;
  watchInterval: number;
  lateAfter: number;
  onLate?: string;
  model?: string[];
  store?: string;
  storeSchema: string;
}

/** `wxhooks runs watch`: the run watch of `listen --watch-runs`, beside the listens, over their store. */
export async function runRunsWatch(ctx: Context, o: RunsWatchOptions): Promise<void> {
  if (o.webhook === undefined) throw new UsageError('runs watch needs --webhook ID: the webhook whose subscriptions are watched.');
  const storeUrl = o.store ?? ctx.env.WXHOOKS_STORE_URL ?? DEFAULTS.storeUrl;
  const kind = storeKind(storeUrl);
  const { service } = await serviceFor(ctx);
  const hook = await service.getWebhook(o.webhook);
  const pg =
    kind === 'postgres' ? await (await import('../store/postgres.js')).PgStore.open({ url: storeUrl, schema: o.storeSchema, ttlMs: DEFAULTS.pairTtlMs, leaseMs: DEFAULTS.claimLeaseMs }) : undefined;
  const style = styleFor(ctx, ctx.stderr);
  const say = (event: Record<string, unknown>, text: string) => (ctx.global.json ? line(ctx.stdout, JSON.stringify(event)) : line(ctx.stderr, text));
  say(
    { event: 'watching', webhook_id: hook.id, interval_ms: o.watchInterval, late_after_ms: o.lateAfter },
    `Watching webhook ${hook.id}'s runs every ${formatDuration(o.watchInterval)}: a forecast hour out for ${formatDuration(o.lateAfter)} and not delivered is late. Ctrl-C to stop.`,
  );
  const watch = watchLateRuns(
    {
      look: () =>
        reconcileWebhook({
          service,
          webhook: hook,
          window: { since: ctx.clock.now() - DEFAULTS.reconcileSinceMs },
          models: o.model,
          lookup: pg ? pgLookup(pg) : fileLookup(configDir(ctx.env), hook.id),
        }),
      lateAfterMs: o.lateAfter,
      intervalMs: o.watchInterval,
      clock: ctx.clock,
      onLate: o.onLate,
      what: 'runs watch',
    },
    { say, stderr: ctx.stderr, env: ctx.env, style },
  );
  try {
    throw new InterruptedError(await ctx.interrupted);
  } finally {
    await watch.stop();
    await pg?.close();
  }
}

export interface RunsOptions {
  dir?: string;
  store?: string;
  storeSchema?: string;
  webhook?: string;
  secretEnv?: string;
  expectHours?: number[];
}

export async function runRuns(ctx: Context, o: RunsOptions): Promise<void> {
  const checkWith = o.webhook === undefined && o.secretEnv === undefined ? [] : (await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'runs' })).secrets;
  const source = sourceOf(o, ctx.env, checkWith);
  const where = whereOf(source);
  const { entries, skipped } = await listStored(source);
  // what was verified (a store's history also keeps what was refused); the tracker leaves test deliveries out
  const deliveries = entries.filter((e) => e.outcome === 'verified' || e.outcome === 'test' || e.outcome === 'duplicate');
  const tracker = new RunTracker();
  for (const d of deliveries) tracker.add({ ...d, time: d.received_at });
  const tests = deliveries.filter((d) => d.test).length;
  const runs = tracker.runs().map((run) => {
    const p = o.expectHours ? progressOf(run, o.expectHours, true) : undefined;
    return { ...runView(run), ...(p ? { missing: p.missing, complete: p.complete } : {}) };
  });
  for (const text of skippedLines(skipped, where)) line(ctx.stderr, text);
  const unverified = unverifiedLine(entries, source, 'not counted');
  if (unverified) line(ctx.stderr, unverified);
  if (tests && !ctx.global.json) line(ctx.stderr, `${tests === 1 ? '1 test delivery (a ping) is' : `${tests} test deliveries (pings) are`} left out of the runs.`);
  if (!ctx.global.json && !runs.length) {
    line(ctx.stderr, `No model run in the ${deliveries.length} deliveries in ${where}.`);
    return;
  }
  emit(ctx, { runs, deliveries: deliveries.length, tests }, () =>
    table(
      ['MODEL', 'INITIALISED', 'HOURS', ...(o.expectHours ? ['MISSING'] : []), 'INIT EVENT'],
      runs.map((r) => [
        printable(r.model),
        r.initialization_time,
        compressHours(r.hours) || '-',
        ...(o.expectHours ? [r.missing!.length ? compressHours(r.missing!) : 'none'] : []),
        r.init_event ? 'yes' : 'no',
      ]),
      Boolean(ctx.stdout.isTTY),
    ),
  );
}
