import { dirname } from 'node:path';
import { Option, type Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { DEFAULTS } from '../delivery/defaults.js';
import { InterruptedError, UsageError } from '../errors.js';
import { emulatorCredentials } from '../emulator/auth.js';
import { startEmulator } from '../emulator/server.js';
import { styleFor } from '../output/style.js';
import { formatDuration } from '../util/duration.js';
import { ensureWritableDir } from '../util/files.js';
import { isLoopback } from '../util/net.js';
import { durations, integer, timeLimit } from '../util/parse.js';
import { portOption, valued } from './options.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(portOption(8788))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--api-key <key>', 'the API key it accepts: a current wb_ key, or a legacy key (default: the wb_ key it made the first time, kept in the store folder)')
    .option('--new-key', 'make a new wb_ key (and keep it) instead of the one kept from before')
    .option('--client-id <id>', 'the client id it reports and accepts with Basic auth (default: emulator, or the one in a wb_ --api-key)')
    .addOption(valued('--retry-delays <list>', 'delays before the (up to 3) retries of a failed delivery', durations, [[...DEFAULTS.retryDelaysMs], DEFAULTS.retryDelaysMs.map(formatDuration).join(',')]))
    .addOption(valued('--attempt-timeout <duration>', 'a delivery with no answer by then has failed', timeLimit, [10_000, '10s']))
    .addOption(valued('--concurrency <n>', 'delivery attempts in flight at once, across every webhook', integer(1, 10_000), [64, '64']))
    .option('--data-file <file>', 'keep webhooks in this file, so they survive a restart')
    .addOption(new Option('--shape <shape>', "answer with the documentation's field names or the live service's").choices(['documented', 'live']).default('documented'))
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks emulator                              # then paste the export lines it prints into another shell
  $ wxhooks emulator --port 0 --retry-delays 1s,2s,4s --data-file ./emulator.json
  $ wxhooks emulator --shape live                 # integer ids, signing_secret, subscriptions as a list
  $ wxhooks emulator --new-key                    # a new key: every shell needs the new export line

Its key is kept across restarts (in the store folder, see \`wxhooks config path\`), so the export lines
pasted into other shells stay good.`,
    )
    .action(act(runEmulator, { longRunning: true }));
}

export interface EmulatorCommandOptions {
  port: number;
  host: string;
  apiKey?: string;
  newKey?: boolean;
  clientId?: string;
  retryDelays: number[];
  attemptTimeout: number;
  concurrency: number;
  dataFile?: string;
  shape: 'documented' | 'live';
}

/**
 * The emulator's own key, kept in the store folder (emulator-key.json) so that a restarted emulator
 * accepts the export lines already pasted into other shells; made anew the first time, or with --new-key.
 * (It is a local test key, not the service's: DESIGN.md's rule that no API key is stored is about the
 * service's.)
 */
async function keptKey(ctx: Context, fresh: boolean): Promise<string> {
  const { keptValue } = await import('../store/kept.js');
  const { configDir } = await import('../store/paths.js');
  const r = await keptValue(configDir(ctx.env), 'emulator-key.json', () => emulatorCredentials(undefined, undefined).apiKey, fresh);
  if (!r.kept) line(ctx.stderr, `warning: the emulator's key could not be kept in the store folder (${r.problem}): a restart will make a new one.`);
  return r.value;
}

export async function runEmulator(ctx: Context, opts: EmulatorCommandOptions): Promise<void> {
  if (opts.retryDelays.length > 3) throw new UsageError('--retry-delays takes at most 3 delays: the service retries a failed delivery up to three times.');
  if (opts.apiKey !== undefined && !opts.apiKey.trim()) throw new UsageError('--api-key is empty.');
  if (opts.dataFile !== undefined) await ensureWritableDir(dirname(opts.dataFile), 'the folder of --data-file');
  if (opts.newKey && (opts.apiKey !== undefined || opts.clientId !== undefined)) throw new UsageError('--new-key makes a key of its own: it goes without --api-key and --client-id.');
  const kept = opts.apiKey === undefined && opts.clientId === undefined ? await keptKey(ctx, Boolean(opts.newKey)) : undefined;
  const emu = await startEmulator({
    port: opts.port,
    host: opts.host,
    apiKey: opts.apiKey ?? kept,
    clientId: opts.clientId,
    retryDelays: opts.retryDelays,
    attemptTimeoutMs: opts.attemptTimeout,
    concurrency: opts.concurrency,
    dataFile: opts.dataFile,
    shape: opts.shape,
    onRequest: ctx.global.verbose ? (r) => line(ctx.stderr, `${r.method} ${r.path} → ${r.status} (${r.ms} ms)`) : undefined,
  });
  if (ctx.global.json) {
    // one line, so a script can read it while the emulator keeps running
    line(ctx.stdout, JSON.stringify({ base_url: emu.url, api_key: emu.apiKey, client_id: emu.clientId, legacy_key: emu.secret, shape: opts.shape, data_file: opts.dataFile ?? null }));
  } else {
    const style = styleFor(ctx, ctx.stdout);
    line(ctx.stdout, `${style.green('●')} wxhooks emulator on ${style.bold(emu.url)} (${opts.shape} shape, ${opts.dataFile ? `state in ${opts.dataFile}` : 'state in memory'}, retries after ${opts.retryDelays.map(formatDuration).join(', ')})`);
    line(ctx.stdout, '');
    line(ctx.stdout, `  export WX_BASE_URL=${emu.url} WX_API_KEY=${emu.apiKey}`);
    line(ctx.stdout, '');
    line(ctx.stdout, style.dim("  # the service's own client reads WB_API_KEY (and a legacy client id from WB_CLIENT_ID):"));
    line(ctx.stdout, `  export WB_API_KEY=${emu.apiKey}${emu.apiKey.startsWith('wb_') ? '' : ` WB_CLIENT_ID=${emu.clientId}`}`);
    line(ctx.stdout, '');
    line(ctx.stdout, style.dim('Next, in another shell, paste the export line, then:'));
    line(ctx.stdout, style.dim('  wxhooks webhook create --url http://127.0.0.1:8787/ --subscribe forecast_hour.available   # prints its id, 1 the first time'));
    line(ctx.stdout, style.dim('  wxhooks listen --webhook 1 --port 8787                                                   # verifies with its stored secret'));
    line(ctx.stdout, style.dim('and in a third: wxhooks trigger forecast_hour.available. Ctrl-C stops the emulator; its key is kept for the next start.'));
  }
  if (!isLoopback(opts.host)) {
    line(ctx.stderr, `warning: the emulator is reachable from other machines on ${opts.host}; it is for development only.`);
  }
  const signal = await ctx.interrupted;
  await emu.close();
  throw new InterruptedError(signal);
}
