import type { Command } from 'commander';
import { buildCatchUp, type CatchUp } from '../api/catch-up.js';
import type { Window } from '../api/forecasts.js';
import { line, type Act, type Context } from '../context.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { describeForecast } from '../delivery/forecast.js';
import { isDelivered } from '../delivery/outcomes.js';
import type { Reconciled } from '../delivery/reconcile.js';
import { compressHours, parseRunName } from '../delivery/runs.js';
import type { PairStore } from '../delivery/store.js';
import { MissingError, NotFoundError, UsageError } from '../errors.js';
import { emit } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { handHere, handToListen, type HandedOver } from '../receiver/catch-up.js';
import { deliveredIn, fileLookup, pgLookup, reconcileWebhook, type ProcessedLookup } from '../receiver/reconcile.js';
import { forwardRoute, type ForwardRoutes } from '../receiver/routes.js';
import { closeSinks, openSinks } from '../receiver/sinks-step.js';
import type { Sink } from '../sinks/sink.js';
import type { SinkTarget } from '../sinks/sink-url.js';
import { configDir } from '../store/paths.js';
import type { PgStore } from '../store/postgres.js';
import { runningListens, type RunningListen } from '../store/running.js';
import { storeKind } from '../store/store-url.js';
import { formatDuration } from '../util/duration.js';
import { duration, hours, identifier, isoTime, timeLimit } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { accumulated, msDefault, repeatable, valued } from '../flags/options.js';
import { sinkFlagHelp } from '../sinks/kinds.js';
import { sinkUrls } from '../sinks/sink-url.js';
import { secretStoreFor } from '../tasks/secrets.js';
import { serviceFor } from '../tasks/service.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(valued('--webhook <id>', 'the webhook whose subscriptions are reconciled (required)', identifier))
    .addOption(valued('--since <duration>', `the runs initialised within this (default ${formatDuration(DEFAULTS.reconcileSinceMs)}; at most --dedupe-ttl)`, duration))
    .option('--run <model@time>', 'one run only, such as wm-6@2026-11-21T00:00:00Z')
    .addOption(repeatable('--model <model>', 'a model a subscription without a model filter receives (repeatable)'))
    .addOption(valued('--expect-hours <range>', 'the forecast hours a run should have, such as 0-240/6: those not out yet are listed as not yet (never missing)', hours))
    .option('--dir <dir>', 'a folder `listen --save-dir` wrote to: what it holds counts as delivered too')
    .option('--store <url>', `where listen keeps the processed pairs: "file" (the store folder) or postgres://… (else WXHOOKS_STORE_URL, else "${DEFAULTS.storeUrl}")`)
    .option('--store-schema <name>', 'with a postgres store: the schema its tables are in', DEFAULTS.schema)
    .addOption(valued('--dedupe-ttl <duration>', "listen's --dedupe-ttl: how long a processed pair is remembered", duration, msDefault(DEFAULTS.pairTtlMs)))
    .option('--catch-up', 'hand what is missing over, once: to the running `listen --webhook ID`, else to --forward-to and --sink')
    .addOption(accumulated('--forward-to <url|type=url>', 'with --catch-up and no listen running: POST each catch-up to your app (TYPE=URL for a type, repeatable)', forwardRoute))
    .addOption(valued('--forward-timeout <duration>', 'how long your app (or the listen) may take to answer a catch-up', timeLimit, msDefault(DEFAULTS.forwardTimeoutMs)))
    .addOption(accumulated('--sink <url>', `with --catch-up and no listen running: ${sinkFlagHelp()}`, sinkUrls))
    .addHelpText(
      'after',
      `
For each subscription of the webhook, what the service should have sent (the forecast API's record of
the runs, their hours and when each became available, filtered by the subscription's model and
initialization_time_hours), against what was processed here: the store's pairs (listen keeps each
forecast's identity beside the pair), a postgres store's history, and a --dir folder. Per run: the hours
delivered, those missing (with when each became available), and those not out yet. Exit 0 when nothing is
missing, 11 when something is: a CI gate. events.available cannot be reconciled (the forecast API keeps no
record of the events products).

--catch-up hands each missing notification over, built from the forecast API as the service would have
built it and marked as a catch-up ("catch_up": true in its signed body, and a Wxhooks-Catch-Up header),
signed with the webhook's stored secret: to the running \`listen --webhook ID\` of this webhook (which
forwards it where it forwards every delivery), else to --forward-to and --sink. Each forecast is handed to
the app once, whichever comes first: the catch-up, or the service's own delivery (a late retry is then a
duplicate). Runs beside a running listen on the same store.

Examples:
  $ wxhooks reconcile --webhook 7
  $ wxhooks reconcile --webhook 7 --since 6h --json | jq '.runs[] | select(.missing | length > 0)'
  $ wxhooks reconcile --webhook 7 --run wm-6@2026-11-21T00:00:00Z --expect-hours 0-240/6
  $ wxhooks reconcile --webhook 7 --catch-up                                   # through the running listen
  $ wxhooks reconcile --webhook 7 --catch-up --forward-to http://localhost:3000/webhooks`,
    )
    .action(act(runReconcile));
}

export interface ReconcileCommandOptions {
  webhook?: string;
  since?: number;
  run?: string;
  model?: string[];
  expectHours?: number[];
  dir?: string;
  store?: string;
  storeSchema: string;
  dedupeTtl: number;
  catchUp?: boolean;
  forwardTo?: ForwardRoutes;
  forwardTimeout: number;
  sink?: SinkTarget[];
}

/** The window the options name: one run, or the runs initialised since a time. */
function windowOf(o: ReconcileCommandOptions, now: number): Window {
  if (o.since !== undefined && o.run !== undefined) throw new UsageError('Give --since or --run, not both.');
  if (o.run !== undefined) {
    const named = parseRunName(o.run);
    if (!named.model || named.init === undefined) throw new UsageError(`--run takes MODEL@TIME, such as wm-6@2026-11-21T00:00:00Z, not "${printable(o.run)}".`);
    return { run: { model: named.model, init: isoTime(named.init, `--run's initialisation time ("${printable(named.init)}")`) } };
  }
  const since = o.since ?? DEFAULTS.reconcileSinceMs;
  if (since > o.dedupeTtl) {
    throw new UsageError(
      `--since ${formatDuration(since)} is longer than --dedupe-ttl (${formatDuration(o.dedupeTtl)}): what was processed earlier than that is forgotten, and would be reported (and caught up) as missing.`,
      {
        hint: "Look back at most as far as listen remembers (its --dedupe-ttl), or give reconcile listen's --dedupe-ttl if it is longer.",
      },
    );
  }
  return { since: now - since };
}

/** `wxhooks reconcile`: ask the forecast API, then the store; report per run; with --catch-up, hand what is missing over; exit 11 if something still is. */
export async function runReconcile(ctx: Context, o: ReconcileCommandOptions): Promise<void> {
  if (o.webhook === undefined) throw new UsageError('reconcile needs --webhook ID: the webhook whose subscriptions are reconciled.');
  if (!o.catchUp && (o.forwardTo !== undefined || o.sink !== undefined)) throw new UsageError('--forward-to and --sink say where --catch-up hands the missing notifications: give --catch-up.');
  const now = ctx.clock.now();
  const window = windowOf(o, now);
  const storeUrl = o.store ?? ctx.env.WXHOOKS_STORE_URL ?? DEFAULTS.storeUrl;
  const kind = storeKind(storeUrl);
  const dir = configDir(ctx.env);
  const { service, base } = await serviceFor(ctx);
  const hook = await service.getWebhook(o.webhook);

  // a postgres store is opened only once the forecast API has answered: one that fails changes nothing, not even a schema
  let pg: PgStore | undefined;
  const openPg = async () => {
    const { PgStore } = await import('../store/postgres.js');
    return (pg ??= await PgStore.open({ url: storeUrl, schema: o.storeSchema, ttlMs: o.dedupeTtl, leaseMs: DEFAULTS.claimLeaseMs }));
  };
  const lookup: ProcessedLookup = kind === 'file' ? fileLookup(dir, hook.id) : async (pairs) => pgLookup(await openPg())(pairs);
  try {
    const report = await reconcileWebhook({ service, webhook: hook, window, models: o.model, expectHours: o.expectHours, lookup, also: await alsoDelivered(ctx, o, storeUrl, kind) });
    let handed: { results: HandedOver[]; via: string } | undefined;
    if (o.catchUp && report.missing.length) {
      const entry = await (await secretStoreFor(ctx)).get(base.url, hook.id);
      if (!entry) {
        throw new NotFoundError(`No secret is stored for webhook ${hook.id} at ${base.url}: a catch-up is signed with it, so that your app verifies it as it verifies the service's deliveries.`, {
          hint: `Store it with \`wxhooks secret set ${hook.id}\` (the one shown when the webhook was created).`,
        });
      }
      const catchUps = report.missing.map((n) => buildCatchUp(n, hook.id, now));
      handed = await handOver(ctx, o, catchUps, { secret: entry.secret, dir, webhook: hook.id, base: base.url, kind, openPg });
    }
    render(ctx, hook.id, window, report, handed, now);
    const still = report.missing.length - (handed?.results.filter((r) => isDelivered(r.outcome)).length ?? 0);
    if (still > 0) {
      throw new MissingError(
        handed
          ? `${still} of the ${report.missing.length} missing notification${report.missing.length === 1 ? '' : 's'} could not be handed over.`
          : `${still} notification${still === 1 ? ' is' : 's are'} missing: the forecast API says ${still === 1 ? 'it was' : 'they were'} available, and ${still === 1 ? 'it was' : 'they were'} not processed here.`,
        {
          hint: handed
            ? 'See why above; run reconcile --catch-up again once that is fixed (what was handed over is not handed over twice).'
            : `Hand them over with \`wxhooks reconcile --webhook ${hook.id} --catch-up\` (through the running listen of this webhook, or with --forward-to URL).`,
        },
      );
    }
  } finally {
    await pg?.close();
  }
}

/** What a history (a postgres store's) or a --dir folder says was delivered, besides the store's pairs. */
async function alsoDelivered(ctx: Context, o: ReconcileCommandOptions, storeUrl: string, kind: 'file' | 'postgres'): Promise<Set<string>> {
  const out = new Set<string>();
  if (o.dir !== undefined) for (const k of await deliveredIn({ dir: o.dir, storeDir: configDir(ctx.env), secrets: [] })) out.add(k);
  if (kind === 'postgres') for (const k of await deliveredIn({ store: storeUrl, schema: o.storeSchema })) out.add(k);
  return out;
}

/** How long to wait for a listen that holds the pairs file to say where it listens (it records itself once its port is open). */
const LISTEN_RECORD_WAIT_MS = 10_000;

/**
 * The catch-ups handed over: to the running listen of the webhook when there is one (the store's one
 * owner, for the file store), else here, through the store, to --forward-to and --sink.
 */
async function handOver(
  ctx: Context,
  o: ReconcileCommandOptions,
  catchUps: CatchUp[],
  h: { secret: string; dir: string; webhook: string; base: string; kind: 'file' | 'postgres'; openPg: () => Promise<PgStore> },
): Promise<{ results: HandedOver[]; via: string }> {
  const findListen = async (): Promise<RunningListen | undefined> => (await runningListens(h.dir)).find((l) => l.webhook_id === h.webhook && (l.base_url === null || l.base_url === h.base));
  const viaListen = async (l: RunningListen) => {
    if (o.forwardTo !== undefined || o.sink !== undefined)
      line(ctx.stderr, `warning: listen ${l.pid} receives webhook ${h.webhook}: the catch-ups go through it, where it forwards every delivery (--forward-to and --sink are not used).`);
    return { results: await handToListen(l.receiver, catchUps, { secret: h.secret, clock: ctx.clock, timeoutMs: o.forwardTimeout + 5_000 }), via: `listen ${l.pid} at ${l.receiver}` };
  };
  const running = await findListen();
  if (running) return viaListen(running);
  if (o.forwardTo === undefined && o.sink === undefined) {
    throw new UsageError(`--catch-up has nowhere to hand the ${catchUps.length} missing notification${catchUps.length === 1 ? '' : 's'}: no listen of webhook ${h.webhook} runs here.`, {
      hint: `Start \`wxhooks listen --webhook ${h.webhook} --forward-to URL\` and run reconcile again (the catch-ups go through it), or give --forward-to URL or --sink URL.`,
    });
  }
  let store: PairStore;
  if (h.kind === 'postgres') store = await h.openPg();
  else {
    const { FilePairStore } = await import('../store/file-pairs.js');
    try {
      store = await FilePairStore.open({ dir: h.dir, webhook: h.webhook, ttlMs: o.dedupeTtl, clock: ctx.clock, door: 'reconcile' });
    } catch (err) {
      // a listen of the webhook took the file since we looked: the catch-ups go through it, once it says where it listens
      if (!(err instanceof UsageError)) throw err;
      for (const until = ctx.clock.monotonic() + LISTEN_RECORD_WAIT_MS; ctx.clock.monotonic() < until; await new Promise((r) => setTimeout(r, 100))) {
        const l = await findListen();
        if (l) return viaListen(l);
      }
      throw err;
    }
  }
  let sinks: Sink[] | undefined;
  try {
    if (o.sink) sinks = await openSinks(o.sink, { connection: () => undefined, drops: () => undefined }); // a short run: a broker lost fails its catch-ups, which say so
    return { results: await handHere(catchUps, { store, secret: h.secret, clock: ctx.clock, forwardTo: o.forwardTo, forwardTimeoutMs: o.forwardTimeout, sinks }), via: 'here' };
  } finally {
    await closeSinks(sinks);
    if (h.kind === 'file') await store.close(); // a postgres store is closed by the command
  }
}

const ago = (createdAt: string | null, now: number) =>
  createdAt === null ? 'when, the forecast API does not say' : `${createdAt.slice(11, 19)}, ${formatDuration(Math.max(0, now - Date.parse(createdAt)))} ago`;
const runName = (model: string, init: string) => `${printable(model)} ${init.replace(':00:00Z', ':00Z')}`;

function render(ctx: Context, webhook: string, window: Window, r: Reconciled, handed: { results: HandedOver[]; via: string } | undefined, now: number): void {
  const caught = handed?.results.map((h) => ({
    ...h.catchUp.notification.forecast,
    subscription_id: h.catchUp.notification.subscription.id,
    trigger_id: h.catchUp.triggerId,
    outcome: h.outcome,
    ...(h.message ? { message: h.message } : {}),
  }));
  const json = {
    webhook_id: webhook,
    window: 'run' in window ? { run: { model: window.run.model, initialization_time: window.run.init } } : { since: new Date(window.since).toISOString() },
    runs: r.runs,
    notifications: r.notifications,
    not_reconcilable: r.not_reconcilable,
    missing: r.missing.length,
    ...(caught ? { caught_up: caught, via: handed!.via } : {}),
  };
  const style = styleFor(ctx, ctx.stdout);
  emit(ctx, json, () => {
    const out: string[] = [];
    const span = 'run' in window ? `run ${runName(window.run.model, window.run.init)}` : `the runs initialised since ${new Date(window.since).toISOString()}`;
    out.push(`Webhook ${webhook}, ${span}:`);
    const types = [...new Set([...r.runs.map((x) => `${x.type}\u0000${x.subscription_id}`), ...r.notifications.map((x) => `${x.type}\u0000${x.subscription_id}`)])];
    for (const t of types) {
      const [type, sub] = t.split('\u0000') as [string, string];
      out.push(`${style.bold(type)} (subscription ${printable(sub)})`);
      for (const run of r.runs.filter((x) => x.type === type && x.subscription_id === sub)) {
        const parts = [`${run.available.length} available`, `${run.delivered.length} delivered`];
        if (run.missing.length) parts.push(style.red(`${run.missing.length} missing`));
        out.push(`  ${runName(run.model, run.initialization_time)}${run.in_progress ? style.dim(' (in progress)') : ''}: ${parts.join(', ')}`);
        for (const m of run.missing) out.push(`    ${style.red('missing')} +${m.forecast_hour}h, available since ${ago(m.created_at, now)}`);
        if (run.not_yet.length) out.push(`    ${style.dim(`not out yet: ${compressHours(run.not_yet)}`)}`);
      }
      for (const n of r.notifications.filter((x) => x.type === type && x.subscription_id === sub)) {
        const state = n.state === 'missing' ? style.red(`missing, available since ${ago(n.created_at, now)}`) : n.state === 'delivered' ? 'delivered' : style.dim('not out yet');
        out.push(`  ${runName(n.model, n.initialization_time)}: ${state}`);
      }
    }
    if (!types.length) out.push(style.dim('  the forecast API lists no run of these subscriptions in the window.'));
    for (const u of r.not_reconcilable) out.push(`${style.bold(u.type)} (subscription ${printable(u.subscription_id)}): ${style.dim(`not reconciled: ${u.why}.`)}`);
    if (handed) {
      out.push('', `Catch-ups (via ${handed.via}):`);
      for (const h of handed.results) {
        const what = describeForecast(h.catchUp.notification.forecast);
        if (h.outcome === 'accepted') out.push(`  ${style.green('✓')} ${what}: handed over`);
        else if (h.outcome === 'duplicate') out.push(`  ${style.blue('↺')} ${what}: it had arrived meanwhile (a duplicate: not handed over again)`);
        else out.push(`  ${style.red('✗')} ${what}: ${printable(h.message ?? h.outcome)}`);
      }
    } else out.push('', r.missing.length ? style.red(`${r.missing.length} missing.`) : style.green('Nothing missing.'));
    return out.join('\n');
  });
}
