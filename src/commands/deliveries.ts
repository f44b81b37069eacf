import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { DeliveryFailedError, NotVerifiedError, UnreachableError, UsageError } from '../errors.js';
import { printable } from '../util/printable.js';
import { emit, table } from '../output/render.js';
import { sinkViewText } from '../output/sink-view.js';
import { styleFor } from '../output/style.js';
import { replayDelivery } from '../receiver/replay.js';
import { skippedLines, unprovenError } from '../receiver/saved.js';
import { sinkExamples } from '../sinks/kinds.js';
import { findStored, listStored, sourceOf, unverifiedLine, whereOf } from '../receiver/stored.js';
import { textOrBase64 } from '../util/bytes.js';
import { url } from '../util/parse.js';
import { valued } from '../flags/options.js';
import { deliverySourceOptions, secretSourceOptions } from '../flags/sources.js';
import { resolveSecrets } from '../tasks/secrets.js';

interface SourceOptions {
  dir?: string;
  store?: string;
  storeSchema?: string;
}

interface CheckOptions {
  webhook?: string;
  secretEnv?: string;
}

/** The secrets `--webhook` or `--secret-env` give to check the signatures of saved files without the mark; none if neither is given. */
async function checkSecrets(ctx: Context, o: CheckOptions, command: string): Promise<string[]> {
  if (o.webhook === undefined && o.secretEnv === undefined) return [];
  return (await resolveSecrets(ctx, { ...o, command })).secrets;
}

export function register(cmd: Command, act: Act): void {
  const list = cmd
    .command('list')
    .description("the deliveries saved in a `listen --save-dir` folder, or kept in a shared store's history, oldest first")
    .option('--type <type>', 'only this type')
    .option(
      '--outcome <outcome>',
      'only this outcome: "verified", "test" (a test ping), "unverified" (a saved file that shows no verification), and from a store\'s history also what was refused ("duplicate", ...)',
    )
    .option('--sink <url>', `or what a sink's stream holds (${sinkExamples(', ')}): its newest ${DEFAULTS.sinkListLimit} messages, what each consumer group has pending, the dead letters`)
    .option('--relay <url>', 'or what a relay keeps refused for a channel (a listen could not verify it): with --webhook ID, or --channel NAME and WXHOOKS_RELAY_TOKEN')
    .option('--channel <name>', 'with --relay: the channel, by name');
  secretSourceOptions(deliverySourceOptions(list), 'with --dir, check saved files without the mark with')
    .addHelpText(
      'after',
      "\nA folder's file is verified when it carries the mark of the listen that saved it with this store folder\n(WXHOOKS_CONFIG_DIR), or when its own signature verifies with the secret given (--webhook, --secret-env).\n\nExamples:\n  $ wxhooks deliveries list --dir ./deliveries\n  $ wxhooks deliveries list --dir ./deliveries --type initialization_time.available --json\n  $ wxhooks deliveries list --dir ./copied-from-the-server --webhook 7\n  $ wxhooks deliveries list --store postgres://wxhooks@db.internal/wxhooks --outcome unverified\n  $ wxhooks deliveries list --sink nats://broker.internal:4222/wxhooks.deliveries\n  $ wxhooks deliveries list --relay https://relay.example.com --webhook 7",
    )
    .action(act(runDeliveriesList));
  const show = cmd
    .command('show')
    .description('one delivery: its headers and body (by file or #id, or by Trigger-Id: the latest verified attempt)')
    .argument('<which>', 'a saved file, a history id (#12) from a store, or a Trigger-Id (or a unique start of one)');
  deliverySourceOptions(show)
    .addHelpText('after', '\nExamples:\n  $ wxhooks deliveries show trg_00mwq3… --dir ./deliveries\n  $ wxhooks deliveries show \'#12\' --store "$WXHOOKS_STORE_URL"')
    .action(act(runDeliveriesShow));
  const replay = cmd
    .command('replay')
    .description('re-send a verified delivery to a receiver, signed afresh now with the same Trigger-Id, marked X-Wxhooks-Replay: 1')
    .argument('<which>', 'a saved file, a history id (#12) from a store, or a Trigger-Id (or a unique start of one): its latest verified attempt')
    .addOption(valued('--to <url>', 'the receiver (your app)', url).makeOptionMandatory());
  secretSourceOptions(deliverySourceOptions(replay), 'sign with')
    .addHelpText(
      'after',
      "\nOnly what verified is replayed: a request that did not verify is never signed with the secret (exit 9), nor a\nsaved file that shows no verification (the mark of this store's listen, or its own signature with the secret).\nExit 0 when the receiver answers 2xx, 7 when it answers anything else, 6 when it cannot be reached.\n\nExamples:\n  $ wxhooks deliveries replay trg_00mwq3… --dir ./deliveries --to http://localhost:3000/hooks --webhook 7\n  $ wxhooks deliveries replay '#12' --store \"$WXHOOKS_STORE_URL\" --to http://localhost:3000/hooks --webhook 7",
    )
    .action(act(runDeliveriesReplay));
}

/** `deliveries list --sink URL`: what a sink's stream holds, read by src/sinks/ and rendered by src/output/sink-view.ts. */
async function listSink(ctx: Context, url: string, o: SourceOptions & CheckOptions & { type?: string; outcome?: string }): Promise<void> {
  if (o.dir !== undefined || o.store !== undefined || o.outcome !== undefined || o.webhook !== undefined || o.secretEnv !== undefined) {
    throw new UsageError('--sink reads a stream; --dir, --store, --outcome, --webhook and --secret-env are about saved deliveries: give one or the other.');
  }
  const { readSink } = await import('../sinks/index.js');
  const view = await readSink(url);
  if (o.type !== undefined) view.deliveries = view.deliveries.filter((e) => e.type === o.type);
  emit(ctx, view, () => sinkViewText(ctx, view, o.type));
}

export async function runDeliveriesList(ctx: Context, o: SourceOptions & CheckOptions & { type?: string; outcome?: string; sink?: string; relay?: string; channel?: string }): Promise<void> {
  if (o.sink !== undefined) return listSink(ctx, o.sink, o);
  if (o.relay !== undefined) return (await import('./relay.js')).runDeliveriesRelay(ctx, o.relay, o);
  const source = sourceOf(o, ctx.env, await checkSecrets(ctx, o, 'deliveries list'));
  const where = whereOf(source);
  const { entries: all, skipped } = await listStored(source);
  const entries = all.filter((e) => (o.type === undefined || e.type === o.type) && (o.outcome === undefined || e.outcome === o.outcome));
  for (const text of skippedLines(skipped, where)) line(ctx.stderr, text);
  const unverified = unverifiedLine(all, source);
  if (unverified) line(ctx.stderr, unverified);
  if (!ctx.global.json && !entries.length) {
    line(ctx.stderr, `No delivery${o.type || o.outcome ? ' matches' : ''} in ${where}.`);
    return;
  }
  const store = !('dir' in source);
  emit(ctx, { deliveries: entries.map(({ model: _m, initialization_time: _i, forecast_hour: _h, ...e }) => e) }, () =>
    table(
      ['RECEIVED', 'TYPE', 'TRIGGER', 'SUB', 'OUTCOME', 'SIZE', store ? 'ID' : 'FILE', ...(store ? ['INSTANCE'] : [])],
      entries.map((e) => [
        e.received_at,
        printable(e.type ?? ''),
        printable(e.trigger_id ?? ''),
        printable(e.subscription_id ?? ''),
        e.outcome,
        String(e.size),
        e.ref,
        ...(store ? [e.instance ?? ''] : []),
      ]),
      Boolean(ctx.stdout.isTTY),
    ),
  );
}

export async function runDeliveriesShow(ctx: Context, which: string, o: SourceOptions): Promise<void> {
  const { found, others } = await findStored(sourceOf(o, ctx.env), which);
  const { headers, body, payload, ...entry } = found;
  emit(ctx, { ...entry, headers, ...textOrBase64(body), payload: payload ?? null }, () => {
    const style = styleFor(ctx, ctx.stdout);
    const head = `${style.bold(printable(found.type ?? 'delivery'))} received ${found.received_at}  ${printable(found.ref)}${found.outcome === 'verified' ? '' : `  ${found.outcome}`}${others ? style.dim(`  (${others} earlier attempt${others === 1 ? '' : 's'} of this Trigger-Id kept too)`) : ''}`;
    const lines = Object.entries(headers).map(([k, v]) => `  ${k}: ${printable(v)}`);
    const shown = payload ? JSON.stringify(payload, null, 2) : body.toString('utf8');
    return [head, '', ...lines, '', printable(shown).replace(/\\n/g, '\n')].join('\n');
  });
}

export async function runDeliveriesReplay(ctx: Context, which: string, o: SourceOptions & { to: string; webhook?: string; secretEnv?: string }): Promise<void> {
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'deliveries replay' });
  const { found } = await findStored(sourceOf(o, ctx.env, secrets), which, { verifiedOnly: true });
  if (found.file && found.outcome === 'unverified') {
    const { message, hint } = unprovenError(found.file, true);
    throw new NotVerifiedError(message, { hint });
  }
  const { Agent } = await import('undici');
  const agent = new Agent();
  try {
    const result = await replayDelivery({ headers: found.headers, body: found.body, secret: secrets[0]!, layout: found.layout, to: o.to, timeoutMs: ctx.global.timeoutMs, dispatcher: agent });
    if (result.error) throw new UnreachableError(`Could not replay to ${o.to}: ${result.error}.`, { hint: 'Is your receiver running on that address?' });
    const ok = result.ok;
    emit(ctx, { replayed: true, delivered: ok, ...(found.file ? { file: found.file } : { id: found.id }), ...result }, () => {
      const style = styleFor(ctx, ctx.stdout);
      return `${ok ? style.green('↻') : style.red('✗')} Replayed ${printable(found.ref)} (Trigger-Id ${printable(result.trigger_id)}, signed afresh, X-Wxhooks-Replay: 1): ${o.to} answered ${result.status} in ${result.ms} ms${result.body ? `: ${printable(result.body)}` : ''}`;
    });
    if (!ok) throw new DeliveryFailedError(`The receiver answered ${result.status} to the replay.`, { status: result.status, serviceMessage: result.body });
  } finally {
    await agent.close();
  }
}
