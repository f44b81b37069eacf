import { dirname, join } from 'node:path';
import { Option, type Command } from 'commander';
import { EmulatorClient } from '../api/emulator-client.js';
import { line, type Act, type Context } from '../context.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { InterruptedError, UsageError } from '../errors.js';
import { emulatorCredentials } from '../emulator/auth.js';
import { attemptLine, attemptsTable } from '../output/attempts.js';
import { emit } from '../output/render.js';
import { reportWriter } from '../output/report-writer.js';
import { styleFor } from '../output/style.js';
import { configDir, ensurePrivateDir } from '../store/paths.js';
import { formatDuration } from '../util/duration.js';
import { ensureWritableDir } from '../util/files.js';
import { isLoopback } from '../util/net.js';
import { durations, identifier, integer, timeLimit } from '../util/parse.js';
import { msDefault, portOption, valued } from '../flags/options.js';
import { serviceFor } from '../tasks/service.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(portOption(DEFAULTS.emulatorPort))
    .option('--host <host>', 'address to bind', DEFAULTS.host)
    .option('--api-key <key>', 'the API key it accepts: a current wb_ key, or a legacy key (default: the wb_ key it made the first time, kept in the store folder)')
    .option('--new-key', 'make a new wb_ key (and keep it) instead of the one kept from before')
    .option('--client-id <id>', 'the client id it reports and accepts with Basic auth (default: emulator, or the one in a wb_ --api-key)')
    .addOption(
      valued('--retry-delays <list>', 'delays before the (up to 3) retries of a failed delivery', durations, [[...DEFAULTS.retryDelaysMs], DEFAULTS.retryDelaysMs.map(formatDuration).join(',')]),
    )
    .addOption(valued('--attempt-timeout <duration>', 'a delivery with no answer by then has failed', timeLimit, msDefault(DEFAULTS.emulatorAttemptTimeoutMs)))
    .addOption(valued('--concurrency <n>', 'delivery attempts in flight at once, across every webhook', integer(1, 10_000), [DEFAULTS.emulatorConcurrency, String(DEFAULTS.emulatorConcurrency)]))
    .option('--data-file <file>', 'keep webhooks in this file (default: emulator-PORT.json in the store folder, so they survive a restart)')
    .option('--in-memory', 'keep nothing: a throwaway emulator whose webhooks go when it stops')
    .addOption(new Option('--shape <shape>', "answer with the documentation's field names or the live service's").choices(['documented', 'live']).default(DEFAULTS.emulatorShape))
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks emulator                              # then paste the export lines it prints into another shell
  $ wxhooks emulator --port 0 --retry-delays 1s,2s,4s --in-memory
  $ wxhooks emulator --shape live                 # integer ids, signing_secret, subscriptions as a list
  $ wxhooks emulator --new-key                    # a new key: every shell needs the new export line
  $ wxhooks emulator deliveries --webhook 1       # in another shell: every delivery attempt it made

Its key and its webhooks are kept across restarts (in the store folder, see \`wxhooks config path\`; the
webhooks per port), so the export lines pasted into other shells, and the webhooks' stored secrets, stay
good. Each delivery attempt is shown on a line: the webhook, subscription, trigger, the receiver's
answer or error, and when the next retry is due.

It serves the forecast API's record of what it published, delivered or not (initialization_times,
run_information with each hour's created_at, degree days' calculation_times, tropical_cyclones), so that
\`wxhooks reconcile\` and \`listen --watch-runs\` work against it: a model it never published is a 404.`,
    )
    .action(act(runEmulator, { longRunning: true }));

  cmd
    .command('deliveries')
    .description("list the delivery attempts the emulator made: the receiver's answer or error, and the next retry")
    .addOption(valued('--webhook <id>', 'only the attempts to this webhook', identifier))
    .addOption(valued('--trigger <id>', 'only the attempts of this trigger (a Trigger-Id)', identifier))
    .option('--failed', 'only the attempts that failed')
    .addOption(valued('--last <n>', 'the last N attempts (the emulator keeps 10,000)', integer(1), [DEFAULTS.emulatorAttemptsShown, String(DEFAULTS.emulatorAttemptsShown)]))
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks emulator deliveries
  $ wxhooks emulator deliveries --webhook 1 --failed     # what the receiver said when it refused
  $ wxhooks emulator deliveries --json | jq '.deliveries[] | select(.outcome == "failed")'`,
    )
    .action(act(runEmulatorDeliveries));
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
  inMemory?: boolean;
  shape: 'documented' | 'live';
}

/**
 * Where the emulator keeps its webhooks: --data-file, else emulator-PORT.json in the store folder (one
 * file a port, as the stored secrets are keyed by the base URL), else nowhere (--in-memory, or --port 0,
 * whose next start has another address and so other webhooks).
 */
export function stateFile(ctx: Context, opts: Pick<EmulatorCommandOptions, 'dataFile' | 'inMemory' | 'port'>): string | undefined {
  if (opts.inMemory && opts.dataFile !== undefined) throw new UsageError('--in-memory keeps nothing: it goes without --data-file.');
  if (opts.dataFile !== undefined) return opts.dataFile;
  if (opts.inMemory || opts.port === 0) return undefined;
  return join(configDir(ctx.env), `emulator-${opts.port}.json`);
}

/**
 * The emulator's own key, kept in the store folder (emulator-key.json) so that a restarted emulator
 * accepts the export lines already pasted into other shells; made anew the first time, or with --new-key.
 * (It is a local test key, not the service's: DESIGN.md's rule that no API key is stored is about the
 * service's.)
 */
async function keptKey(ctx: Context, fresh: boolean): Promise<string> {
  const { keptValue } = await import('../store/kept.js');
  const r = await keptValue(configDir(ctx.env), 'emulator-key.json', () => emulatorCredentials(undefined, undefined).apiKey, fresh);
  if (!r.kept) line(ctx.stderr, `warning: the emulator's key could not be kept in the store folder (${r.problem}): a restart will make a new one.`);
  return r.value;
}

export async function runEmulator(ctx: Context, opts: EmulatorCommandOptions): Promise<void> {
  if (opts.retryDelays.length > 3) throw new UsageError('--retry-delays takes at most 3 delays: the service retries a failed delivery up to three times.');
  if (opts.apiKey !== undefined && !opts.apiKey.trim()) throw new UsageError('--api-key is empty.');
  const dataFile = stateFile(ctx, opts);
  if (opts.dataFile !== undefined) await ensureWritableDir(dirname(opts.dataFile), 'the folder of --data-file');
  else if (dataFile !== undefined) ensurePrivateDir(dirname(dataFile)); // the store folder: private, as for the secrets
  if (opts.newKey && (opts.apiKey !== undefined || opts.clientId !== undefined)) throw new UsageError('--new-key makes a key of its own: it goes without --api-key and --client-id.');
  const kept = opts.apiKey === undefined && opts.clientId === undefined ? await keptKey(ctx, Boolean(opts.newKey)) : undefined;
  const json = ctx.global.json;
  const style = styleFor(ctx, ctx.stdout);
  // one line per delivery attempt, written in batches (never waiting for a reader that does not read)
  const output = reportWriter(ctx.stdout, json);
  const { startEmulator } = await import('../emulator/server.js'); // undici: not for `emulator deliveries`
  const emu = await startEmulator({
    port: opts.port,
    host: opts.host,
    apiKey: opts.apiKey ?? kept,
    clientId: opts.clientId,
    retryDelays: opts.retryDelays,
    attemptTimeoutMs: opts.attemptTimeout,
    concurrency: opts.concurrency,
    dataFile,
    shape: opts.shape,
    onRequest: ctx.global.verbose ? (r) => line(ctx.stderr, `${r.method} ${r.path} → ${r.status} (${r.ms} ms)`) : undefined,
    onAttempt: (a) => output.push(json ? JSON.stringify({ event: 'attempt', ...a }) : attemptLine(a, style, ctx.stdout.isTTY ? ctx.stdout.columns : undefined)),
  });
  const webhooks = emu.state.webhooks.size;
  if (json) {
    // its first line, so a script can read it while the emulator keeps running; then one line per delivery attempt
    line(ctx.stdout, JSON.stringify({ base_url: emu.url, api_key: emu.apiKey, client_id: emu.clientId, legacy_key: emu.secret, shape: opts.shape, data_file: dataFile ?? null, webhooks }));
  } else {
    const state = dataFile ? `webhooks kept in ${dataFile}${webhooks ? `: ${webhooks} from before` : ''}` : `webhooks in memory only${opts.port === 0 && !opts.inMemory ? ' (--port 0)' : ''}`;
    line(ctx.stdout, `${style.green('●')} wxhooks emulator on ${style.bold(emu.url)} (${opts.shape} shape, ${state}, retries after ${opts.retryDelays.map(formatDuration).join(', ')})`);
    line(ctx.stdout, '');
    line(ctx.stdout, `  export WX_BASE_URL=${emu.url} WX_API_KEY=${emu.apiKey}`);
    line(ctx.stdout, '');
    line(ctx.stdout, style.dim("  # the service's own client reads WB_API_KEY (and a legacy client id from WB_CLIENT_ID):"));
    line(ctx.stdout, `  export WB_API_KEY=${emu.apiKey}${emu.apiKey.startsWith('wb_') ? '' : ` WB_CLIENT_ID=${emu.clientId}`}`);
    line(ctx.stdout, '');
    line(ctx.stdout, style.dim('Next, in another shell, paste the export line, then:'));
    line(ctx.stdout, style.dim(`  wxhooks webhook create --url http://127.0.0.1:${DEFAULTS.listenPort}/ --subscribe forecast_hour.available   # prints its id, 1 the first time`));
    line(ctx.stdout, style.dim(`  wxhooks listen --webhook 1 --port ${DEFAULTS.listenPort}                                                   # verifies with its stored secret`));
    line(
      ctx.stdout,
      style.dim(
        `and in a third: wxhooks trigger forecast_hour.available. Each delivery attempt shows here. Ctrl-C stops the emulator; its key${dataFile ? ' and webhooks are' : ' is'} kept for the next start.`,
      ),
    );
    line(ctx.stdout, '');
  }
  if (!isLoopback(opts.host)) {
    line(ctx.stderr, `warning: the emulator is reachable from other machines on ${opts.host}; it is for development only.`);
  }
  const signal = await ctx.interrupted;
  await emu.close();
  output.flush();
  throw new InterruptedError(signal);
}

export interface EmulatorDeliveriesOptions {
  webhook?: string;
  trigger?: string;
  failed?: boolean;
  last: number;
}

/** `wxhooks emulator deliveries`: the attempts the emulator made (its GET /emulator/v1/deliveries), the latest last. */
export async function runEmulatorDeliveries(ctx: Context, o: EmulatorDeliveriesOptions): Promise<void> {
  const { service } = await serviceFor(ctx);
  const client = new EmulatorClient(service.http);
  await client.ensureEmulator('emulator deliveries', 'lists what an emulator delivered');
  const all = (await client.deliveries({ webhook: o.webhook, trigger: o.trigger })).filter((a) => !o.failed || a.outcome === 'failed');
  const shown = all.slice(-o.last);
  if (!ctx.global.json && !shown.length) {
    line(ctx.stderr, `No delivery attempts${o.webhook || o.trigger || o.failed ? ' match' : ' yet'}.`);
    return;
  }
  emit(ctx, { deliveries: shown, total: all.length }, () => attemptsTable(shown, Boolean(ctx.stdout.isTTY), ctx.stdout.columns));
  if (!ctx.global.json && all.length > shown.length) line(ctx.stderr, `the last ${shown.length} of ${all.length} attempts; --last N for more`);
}
