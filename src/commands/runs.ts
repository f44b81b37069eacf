import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { printable } from '../util/printable.js';
import { emit, table } from '../output/render.js';
import { skippedLines } from '../receiver/saved.js';
import { listStored, sourceOf, unverifiedLine, whereOf } from '../receiver/stored.js';
import { compressHours, progressOf, RunTracker, runView } from '../delivery/runs.js';
import { hours } from '../util/parse.js';
import { valued } from '../flags/options.js';
import { deliverySourceOptions, secretSourceOptions } from '../flags/sources.js';
import { resolveSecrets } from '../tasks/secrets.js';

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
  for (const d of deliveries) tracker.add(d);
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
