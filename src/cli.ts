import type { Command } from 'commander';
import type { AuthScheme, Context } from './context.js';
import { ExitCode, WxError } from './errors.js';
import { parseTimeout } from './util/duration.js';
import { version } from './version.js';

/** A command's run function: the context first, then commander's arguments (positionals, then options). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Run = (ctx: Context, ...args: any[]) => Promise<void>;
export type Act = (run: Run, options?: { longRunning?: boolean }) => (...args: unknown[]) => Promise<void>;

interface GlobalFlags {
  baseUrl?: string;
  auth?: AuthScheme;
  json?: boolean;
  verbose?: boolean;
  timeout: string;
  color: boolean;
}

let interruptHandler: ((signal: NodeJS.Signals) => void) | undefined;
let recoveryHint: string | undefined;

function makeContext(flags: GlobalFlags, longRunning: boolean): Context {
  const interrupted = new Promise<NodeJS.Signals>((resolve) => {
    if (longRunning) interruptHandler = resolve;
  });
  return {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    get stdin() {
      return process.stdin;
    },
    global: {
      baseUrl: flags.baseUrl,
      auth: flags.auth,
      json: Boolean(flags.json),
      verbose: Boolean(flags.verbose),
      timeoutMs: parseTimeout(flags.timeout, '--timeout'),
      color: flags.color,
    },
    interrupted,
    setRecoveryHint(hint: string) {
      recoveryHint = hint;
    },
  };
}

const act: Act = (run, options = {}) =>
  async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    const ctx = makeContext(cmd.optsWithGlobals() as GlobalFlags, Boolean(options.longRunning));
    await run(ctx, ...args.slice(0, -1));
  };

type Register = (cmd: Command, act: Act) => void;

/** Every command group, one line each: its name, its summary, and the module that declares and runs it. */
const GROUPS: [name: string, summary: string, load: () => Promise<{ register: Register }>][] = [
  ['auth', 'check the API key', () => import('./commands/auth.js')],
  ['webhook', 'create, list, show, change and delete webhooks', () => import('./commands/webhook.js')],
  ['subscription', "add, change, remove and list a webhook's subscriptions", () => import('./commands/subscription.js')],
  ['ping', 'ask the service for one test delivery now (never retried); exit 7 if it failed', () => import('./commands/ping.js')],
  ['listen', 'receive deliveries locally: verify each one, skip duplicates, show it, forward it to your app', () => import('./commands/listen.js')],
  ['verify', 'check a captured delivery offline: which signature layout matched, or why none did', () => import('./commands/verify.js')],
  ['send', 'sign and POST one delivery, as the service would, to any receiver (to test your own endpoint)', () => import('./commands/send.js')],
  ['secret', 'the local store of webhook secrets (keyed by base URL and webhook id)', () => import('./commands/secret.js')],
  ['emulator', 'run a local copy of the service: the whole API, signed deliveries, retries', () => import('./commands/emulator.js')],
  ['trigger', 'make the emulator publish an event, or a whole model run (refuses anything but an emulator)', () => import('./commands/trigger.js')],
  ['config', 'settings kept in the store (the API key is never stored)', () => import('./commands/config.js')],
  ['completion', 'print a shell completion script', () => import('./commands/completion.js')],
];

const GLOBAL_WITH_VALUE = new Set(['--base-url', '--auth', '--timeout']);

/** The command group argv names (`help GROUP` included), or undefined; `*` for all (completion needs the whole tree). */
function requestedGroup(args: string[]): string | undefined {
  const words: string[] = [];
  for (let i = 0; i < args.length && words.length < 2; i++) {
    const a = args[i]!;
    if (a === '--') break;
    if (a.startsWith('-')) {
      if (GLOBAL_WITH_VALUE.has(a)) i++;
      continue;
    }
    words.push(a);
  }
  const name = words[0] === 'help' ? words[1] : words[0];
  return name === 'completion' ? '*' : name;
}

/**
 * The commander program. Only the command group being run is loaded and
 * declared in full; the others are listed by name and summary, which is all
 * `--help` shows of them.
 */
export async function buildProgram(argv: string[] = process.argv): Promise<Command> {
  const wanted = requestedGroup(argv.slice(2));
  const [{ Command, Option }, ...loaded] = await Promise.all([
    import('commander'),
    ...GROUPS.map(([name, , load]) => (wanted === '*' || wanted === name ? load() : undefined)),
  ]);
  const program = new Command('wxhooks')
    .description('Manage, receive, verify and emulate the weather forecast service\'s webhooks.')
    .version(version(), '-V, --version', 'print the version')
    .option('--base-url <url>', 'the service address (else WX_BASE_URL, else the base-url setting)')
    .addOption(new Option('--auth <scheme>', 'how to send WX_API_KEY').choices(['bearer', 'basic']))
    .option('--json', 'print one JSON document on stdout, nothing else')
    .option('--verbose', 'log each request to stderr (the key redacted), and stacks on errors')
    .option('--timeout <duration>', 'deadline for a request to the service, retries included', '30s')
    .option('--no-color', 'no colours (NO_COLOR and FORCE_COLOR are honoured too)')
    .helpOption('-h, --help', 'show help')
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .showHelpAfterError('(run the command with --help for usage)')
    .exitOverride()
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks emulator                       # a local copy of the service, for trying things out
  $ wxhooks auth status                    # check WX_API_KEY against the service
  $ wxhooks webhook create --url https://example.com/hooks --subscribe forecast_hour.available
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/webhooks

Environment: WX_API_KEY (required), WX_BASE_URL, WX_CLIENT_ID (with --auth basic), WXHOOKS_CONFIG_DIR.
Exit codes: 0 done, 1 bug, 2 usage, 3 credentials, 4 not found, 5 refused, 6 unreachable,
            7 ping failed, 8 secret not saved, 9 not verified, 130 interrupted.`,
    );

  GROUPS.forEach(([name, summary], i) => {
    const cmd = program.command(name).description(summary);
    loaded[i]?.register(cmd, act);
  });
  return program;
}

async function printError(err: unknown, verbose: boolean): Promise<number> {
  const { redact } = await import('./util/redact.js');
  const { Chalk } = await import('chalk');
  const tty = process.stderr.isTTY && !process.env.NO_COLOR && !process.argv.includes('--no-color');
  const c = new Chalk({ level: tty ? 1 : 0 });
  const write = (text: string) => process.stderr.write(`${redact(text, [process.env.WX_API_KEY])}\n`);
  if (err instanceof WxError) {
    if (err.exitCode === ExitCode.INTERRUPTED) return err.exitCode;
    if (err.exitCode === ExitCode.SECRET_NOT_SAVED) {
      const e = err as import('./errors.js').SecretNotSavedError;
      // The one place a secret is printed outside `secret show`: it would be lost otherwise.
      process.stderr.write(`\n${c.bold('The webhook was created, but its secret could not be stored. Keep it now; it is shown only this once:')}\n\n  ${e.secret}\n\n`);
    }
    write(`${c.red('error:')} ${err.message}`);
    if (err.hint) write(`${c.dim('hint:')} ${err.hint}`);
    if (verbose && err.stack) write(c.dim(err.stack));
    if (verbose && err.cause instanceof Error && err.cause.stack) write(c.dim(`caused by: ${err.cause.stack}`));
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  write(`${c.red('error:')} unexpected: ${message}`);
  if (verbose && err instanceof Error && err.stack) write(c.dim(err.stack));
  else write(`${c.dim('hint:')} this is a bug in wxhooks; run again with --verbose for the stack, and report it.`);
  return ExitCode.UNEXPECTED;
}

/** Parses argv, runs the command, and returns the exit code. Never exits by itself. */
/**
 * Every command's help, as commander renders it (80 columns): written at build time into
 * dist/bin/help.json by scripts/bundle.js, so `wxhooks [group [command]] --help` needs no commander.
 */
export async function renderAllHelp(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const render = async (path: string[]) => {
    const program = await buildProgram(['node', 'wxhooks', ...path, '--help']);
    let cmd: Command = program;
    for (const name of path) cmd = cmd.commands.find((c) => c.name() === name)!;
    let text = '';
    for (const c of [program, ...program.commands, ...program.commands.flatMap((g) => g.commands)]) {
      c.configureOutput({ writeOut: (t) => (text += t), getOutHelpWidth: () => 80 });
    }
    cmd.outputHelp();
    out[path.join(' ')] = text;
    return cmd;
  };
  await render([]);
  for (const [name] of GROUPS) {
    const group = await render([name]);
    for (const sub of group.commands) await render([name, sub.name()]);
  }
  return out;
}

/** `wxhooks [words] --help` from the pre-rendered texts, or undefined to let commander do it. */
async function prerenderedHelp(args: string[]): Promise<string | undefined> {
  const last = args[args.length - 1];
  if (last !== '--help' && last !== '-h') return undefined;
  const words = args.slice(0, -1);
  if (words.some((w) => w.startsWith('-'))) return undefined;
  const { readFile } = await import('node:fs/promises');
  try {
    const texts = JSON.parse(await readFile(new URL('./help.json', import.meta.url), 'utf8')) as Record<string, string>;
    return texts[words.join(' ')];
  } catch {
    return undefined; // not bundled (a tsc build): commander renders it
  }
}

export async function main(argv: string[] = process.argv): Promise<number> {
  const args = argv.slice(2);
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
    // the fast path: nothing but the version
    process.stdout.write(`${version()}\n`);
    return ExitCode.OK;
  }
  const help = await prerenderedHelp(args);
  if (help !== undefined) {
    process.stdout.write(help);
    return ExitCode.OK;
  }
  try {
    const program = await buildProgram(argv);
    await program.parseAsync(argv);
    return ExitCode.OK;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('commander.')) {
      // commander printed its own message; help and --version exit 0, parse errors are usage errors
      return (err as { exitCode: number }).exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    }
    return printError(err, argv.includes('--verbose'));
  }
}

/** The binary's entry: Ctrl-C handling, then exit with main's code once output is flushed. */
export async function run(): Promise<void> {
  let interrupts = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupts++;
    if (interruptHandler && interrupts === 1) interruptHandler(signal);
    else process.exit(signal === 'SIGINT' ? ExitCode.INTERRUPTED : 128 + 15);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    // A closed pipe (`| head`): what was not printed is lost, so say how to get it back.
    if (recoveryHint) process.stderr.write(`wxhooks: the output was cut short (${err.code ?? err.message}); ${recoveryHint}\n`);
    process.exit(err.code === 'EPIPE' ? ExitCode.OK : ExitCode.UNEXPECTED);
  });
  const code = await main();
  const flush = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => (s.writableLength ? s.write('', () => resolve()) : resolve()));
  await Promise.all([flush(process.stdout), flush(process.stderr)]);
  process.exit(code);
}
