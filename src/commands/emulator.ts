import { Option, type Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';
import { InterruptedError, UsageError } from '../errors.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .option('--port <port>', 'port to listen on (0 picks a free one)', '8788')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--api-key <key>', 'the API key it accepts (default: a new random one, printed)')
    .option('--client-id <id>', 'the client id it reports, and accepts with Basic auth', 'emulator')
    .option('--retry-delays <list>', 'delays before the (up to 3) retries of a failed delivery', '5s,30s,2m')
    .option('--attempt-timeout <duration>', 'a delivery with no answer by then has failed', '10s')
    .option('--data-file <file>', 'keep webhooks in this file, so they survive a restart')
    .addOption(new Option('--shape <shape>', "answer with the documentation's field names or the live service's").choices(['documented', 'live']).default('documented'))
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks emulator                              # then paste the export lines it prints into another shell
  $ wxhooks emulator --port 0 --retry-delays 1s,2s,4s --data-file ./emulator.json
  $ wxhooks emulator --shape live                 # integer ids, signing_secret, subscriptions as a list`,
    )
    .action(act(runEmulator, { longRunning: true }));
}

export interface EmulatorCommandOptions {
  port: string;
  host: string;
  apiKey?: string;
  clientId: string;
  retryDelays: string;
  attemptTimeout: string;
  dataFile?: string;
  shape: 'documented' | 'live';
}

export async function runEmulator(ctx: Context, opts: EmulatorCommandOptions): Promise<void> {
  const { parseDuration, parseTimeout } = await import('../util/duration.js');
  if (!/^\d+$/.test(opts.port) || Number(opts.port) > 65535) throw new UsageError(`--port must be a port number (0-65535), not "${opts.port}".`);
  const delays = opts.retryDelays.split(',').map((d) => parseDuration(d.trim(), '--retry-delays'));
  if (delays.length > 3) throw new UsageError('--retry-delays takes at most 3 delays: the service retries a failed delivery up to three times.');
  if (opts.apiKey !== undefined && !opts.apiKey.trim()) throw new UsageError('--api-key is empty.');
  if (opts.dataFile !== undefined) {
    const { dirname } = await import('node:path');
    await (await import('../util/files.js')).ensureWritableDir(dirname(opts.dataFile), 'the folder of --data-file');
  }
  const { startEmulator } = await import('../emulator/server.js');
  const { formatDuration } = await import('../util/duration.js');
  let emu;
  try {
    emu = await startEmulator({
      port: Number(opts.port),
      host: opts.host,
      apiKey: opts.apiKey,
      clientId: opts.clientId,
      retryDelays: delays,
      attemptTimeoutMs: parseTimeout(opts.attemptTimeout, '--attempt-timeout'),
      dataFile: opts.dataFile,
      shape: opts.shape,
      onRequest: ctx.global.verbose ? (r) => line(ctx.stderr, `${r.method} ${r.path} → ${r.status} (${r.ms} ms)`) : undefined,
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new UsageError(`Port ${opts.port} on ${opts.host} is already in use.`, { hint: 'Pick another with --port (0 picks a free one).' });
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new UsageError(`Cannot bind ${opts.host}: ${code}.`);
    throw err;
  }
  if (ctx.global.json) {
    // one line, so a script can read it while the emulator keeps running
    line(ctx.stdout, JSON.stringify({ base_url: emu.url, api_key: emu.apiKey, client_id: emu.clientId, shape: opts.shape, data_file: opts.dataFile ?? null }));
  } else {
    const { styleFor } = await import('../output/style.js');
    const c = styleFor(ctx, ctx.stdout);
    line(ctx.stdout, `${c.green('●')} wxhooks emulator on ${c.bold(emu.url)} (${opts.shape} shape, ${opts.dataFile ? `state in ${opts.dataFile}` : 'state in memory'}, retries after ${delays.map(formatDuration).join(', ')})`);
    line(ctx.stdout, '');
    line(ctx.stdout, `  export WX_BASE_URL=${emu.url} WX_API_KEY=${emu.apiKey}`);
    line(ctx.stdout, '');
    line(ctx.stdout, c.dim(`Next, in another shell: paste that line, then \`wxhooks listen --port 8787\` and \`wxhooks webhook create --url http://127.0.0.1:8787/ --subscribe forecast_hour.available\`, then \`wxhooks trigger forecast_hour.available\`. Ctrl-C stops the emulator.`));
  }
  if (opts.host !== '127.0.0.1' && opts.host !== 'localhost' && opts.host !== '::1') {
    line(ctx.stderr, `warning: the emulator is reachable from other machines on ${opts.host}; it is for development only.`);
  }
  const signal = await ctx.interrupted;
  await emu.close();
  if (signal === 'SIGINT') throw new InterruptedError('interrupted');
}
