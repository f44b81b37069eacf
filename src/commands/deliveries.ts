import { basename } from 'node:path';
import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { DeliveryFailedError, NotFoundError, UnreachableError } from '../errors.js';
import { printable } from '../output/printable.js';
import { emit, table } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { replayDelivery } from '../receiver/replay.js';
import { readSavedDir, savedBody, type SavedFile } from '../receiver/saved.js';
import { url } from '../util/parse.js';
import { valued } from './options.js';
import { resolveSecrets, secretSourceOptions } from './shared.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .command('list')
    .description('the deliveries saved in a `listen --save-dir` folder, oldest first')
    .requiredOption('--dir <dir>', 'the folder')
    .option('--type <type>', 'only this type')
    .option('--outcome <outcome>', 'only this outcome: a saved delivery is "verified" (a test ping: "test")')
    .addHelpText('after', '\nExamples:\n  $ wxhooks deliveries list --dir ./deliveries\n  $ wxhooks deliveries list --dir ./deliveries --type initialization_time.available --json')
    .action(act(runDeliveriesList));
  cmd
    .command('show')
    .description('one saved delivery: its headers and body (by file, or by Trigger-Id: the latest attempt)')
    .argument('<file-or-trigger>', 'a saved file, or a Trigger-Id')
    .requiredOption('--dir <dir>', 'the folder')
    .addHelpText('after', '\nExamples:\n  $ wxhooks deliveries show trg_00mwq3… --dir ./deliveries')
    .action(act(runDeliveriesShow));
  const replay = cmd
    .command('replay')
    .description('re-send a saved delivery to a receiver, signed afresh now with the same Trigger-Id, marked X-Wxhooks-Replay: 1')
    .argument('<file-or-trigger>', 'a saved file, or a Trigger-Id')
    .requiredOption('--dir <dir>', 'the folder')
    .addOption(valued('--to <url>', 'the receiver (your app)', url).makeOptionMandatory());
  secretSourceOptions(replay, 'sign with')
    .addHelpText('after', '\nExit 0 when the receiver answers 2xx, 7 when it answers anything else, 6 when it cannot be reached.\n\nExamples:\n  $ wxhooks deliveries replay trg_00mwq3… --dir ./deliveries --to http://localhost:3000/hooks --webhook 7')
    .action(act(runDeliveriesReplay));
}

interface Entry {
  file: string;
  received_at: string;
  type?: string;
  trigger_id?: string;
  subscription_id?: string;
  size: number;
  outcome: 'verified' | 'test';
}

const text = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : undefined);

function entryOf(d: SavedFile): Entry {
  const p = d.payload;
  return {
    file: d.file,
    received_at: d.saved.received_at,
    type: text(p?.type),
    trigger_id: text(p?.trigger_id) ?? d.saved.headers['trigger-id'],
    subscription_id: text(p?.subscription_id),
    size: savedBody(d.saved).length,
    outcome: p?.test === true ? 'test' : 'verified',
  };
}

export async function runDeliveriesList(ctx: Context, o: { dir: string; type?: string; outcome?: string }): Promise<void> {
  const { deliveries, skipped } = await readSavedDir(o.dir);
  const entries = deliveries.map(entryOf).filter((e) => (o.type === undefined || e.type === o.type) && (o.outcome === undefined || e.outcome === o.outcome));
  if (skipped) line(ctx.stderr, `warning: ${skipped} file(s) in ${o.dir} are not saved deliveries; passed over.`);
  if (!ctx.global.json && !entries.length) {
    line(ctx.stderr, `No saved delivery${o.type || o.outcome ? ' matches' : ''} in ${o.dir}.`);
    return;
  }
  emit(ctx, { deliveries: entries }, () =>
    table(
      ['RECEIVED', 'TYPE', 'TRIGGER', 'SUB', 'OUTCOME', 'SIZE', 'FILE'],
      entries.map((e) => [e.received_at, e.type ?? '', e.trigger_id ?? '', e.subscription_id ?? '', e.outcome, String(e.size), basename(e.file)]),
      Boolean(ctx.stdout.isTTY),
    ),
  );
}

/** A saved delivery by its file name (in the folder, or a path), or by Trigger-Id (the latest of its attempts). */
async function find(dir: string, which: string): Promise<{ found: SavedFile; others: number }> {
  const { deliveries } = await readSavedDir(dir);
  const byFile = deliveries.find((d) => d.file === which || basename(d.file) === which || basename(d.file) === basename(which));
  if (byFile) return { found: byFile, others: 0 };
  const byTrigger = deliveries.filter((d) => entryOf(d).trigger_id === which);
  if (!byTrigger.length) throw new NotFoundError(`No delivery saved in ${dir} is "${which}" (a file name or a Trigger-Id).`, { hint: `\`wxhooks deliveries list --dir ${dir}\` shows what is there.` });
  return { found: byTrigger.at(-1)!, others: byTrigger.length - 1 };
}

export async function runDeliveriesShow(ctx: Context, which: string, o: { dir: string }): Promise<void> {
  const { found, others } = await find(o.dir, which);
  const body = savedBody(found.saved);
  emit(ctx, { file: found.file, ...found.saved, payload: found.payload ?? null }, () => {
    const style = styleFor(ctx, ctx.stdout);
    const head = `${style.bold(printable(entryOf(found).type ?? 'delivery'))} received ${found.saved.received_at}  ${basename(found.file)}${others ? style.dim(`  (${others} earlier attempt${others === 1 ? '' : 's'} of this Trigger-Id saved too)`) : ''}`;
    const headers = Object.entries(found.saved.headers).map(([k, v]) => `  ${k}: ${printable(v)}`);
    const shown = found.payload ? JSON.stringify(found.payload, null, 2) : body.toString('utf8');
    return [head, '', ...headers, '', printable(shown).replace(/\\n/g, '\n')].join('\n');
  });
}

export async function runDeliveriesReplay(ctx: Context, which: string, o: { dir: string; to: string; webhook?: string; secretEnv?: string }): Promise<void> {
  const { found } = await find(o.dir, which);
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv });
  const { Agent } = await import('undici');
  const agent = new Agent();
  try {
    const result = await replayDelivery({ headers: found.saved.headers, body: savedBody(found.saved), secret: secrets[0]!, to: o.to, timeoutMs: ctx.global.timeoutMs, dispatcher: agent });
    if (result.error) throw new UnreachableError(`Could not replay to ${o.to}: ${result.error}.`, { hint: 'Is your receiver running on that address?' });
    const ok = result.ok;
    emit(ctx, { replayed: true, delivered: ok, file: found.file, ...result }, () => {
      const style = styleFor(ctx, ctx.stdout);
      return `${ok ? style.green('↻') : style.red('✗')} Replayed ${basename(found.file)} (Trigger-Id ${printable(result.trigger_id)}, signed afresh, X-Wxhooks-Replay: 1): ${o.to} answered ${result.status} in ${result.ms} ms${result.body ? `: ${printable(result.body)}` : ''}`;
    });
    if (!ok) throw new DeliveryFailedError(`The receiver answered ${result.status} to the replay.`, { status: result.status, serviceMessage: result.body });
  } finally {
    await agent.close();
  }
}
