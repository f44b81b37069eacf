import type { Command } from 'commander';
import type { Act, AuthScheme, Context, Out, Run } from './context.js';
import { EXIT_CODE_WORDS, ExitCode, InterruptedError, SecretNotSavedError, WxError, type StopReason } from './errors.js';
import { systemClock, type Clock } from './util/clock.js';
import { version } from './version.js';

/**
 * The world a run of the CLI sees: its variables, its streams, the signals that stop it. The binary
 * passes the process's own (`processIo`); tests pass buffers, and run commands in-process.
 */
export interface Io {
  env: Record<string, string | undefined>;
  stdout: Out;
  stderr: Out;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Resolves when the process is told to stop, or its stdout closes. Only long-running commands wait on it. */
  interrupted: Promise<StopReason>;
  /** Called when a long-running command starts: the first Ctrl-C then resolves `interrupted` instead of exiting. */
  longRunning?(): void;
  /** What to tell the user if stdout closes before everything was printed. */
  setRecoveryHint?(hint: string): void;
  /** The clocks (default: the machine's). */
  clock?: Clock;
  /** Builds the service client instead of the usual one. */
  serviceFactory?: Context['serviceFactory'];
  /** The first delay before a retry of a request to the service (default 250 ms): a test passes a short one. */
  retryBaseMs?: number;
}

/** The global options: declared once, here, for commander and for finding the command group before commander is loaded. */
const GLOBAL_OPTIONS: [flags: string, description: string][] = [
  ['--base-url <url>', 'the service address (else WX_BASE_URL, else the base-url setting)'],
  ['--auth <scheme>', "how to send the API key: auto (as the service's own client does), bearer or basic"],
  ['--json', 'JSON on stdout, nothing else: one document, or for listen (long-running) one object a line (NDJSON)'],
  ['--verbose', 'log each request to stderr (the key redacted), and stacks on errors'],
  ['--timeout <duration>', 'deadline for a request to the service, retries included'],
  ['--no-color', 'no colours (NO_COLOR and FORCE_COLOR are honoured too)'],
];
const GLOBAL_WITH_VALUE = new Set(GLOBAL_OPTIONS.filter(([flags]) => flags.includes('<')).map(([flags]) => flags.split(' ')[0]!));

interface GlobalFlags {
  baseUrl?: string;
  auth?: AuthScheme;
  json?: boolean;
  verbose?: boolean;
  timeout: number;
  color: boolean;
}

type Register = (cmd: Command, act: Act) => void;

/** Every command group, one line each: its name, its summary, and the module that declares and runs it. */
export const GROUPS: [name: string, summary: string, load: () => Promise<{ register: Register }>][] = [
  ['auth', 'check the API key', () => import('./commands/auth.js')],
  ['webhook', 'create, list, show, change and delete webhooks', () => import('./commands/webhook.js')],
  ['subscription', "add, change, remove and list a webhook's subscriptions", () => import('./commands/subscription.js')],
  ['ping', 'ask the service for a test delivery now, of one subscription or each of a webhook (never retried); exit 7 if one failed', () => import('./commands/ping.js')],
  ['listen', 'receive deliveries locally: verify each one, skip duplicates, show it, forward it to your app', () => import('./commands/listen.js')],
  ['doctor', 'check the chain from the service to this machine, link by link, and say what to do about each broken one', () => import('./commands/doctor.js')],
  [
    'deliveries',
    "the deliveries listen kept (a --save-dir folder, a --store's history): list, show, and replay them to your app; list what a --sink's stream or a --relay holds too",
    () => import('./commands/deliveries.js'),
  ],
  [
    'runs',
    "model runs in what listen kept (a --save-dir folder, a --store's history): the forecast hours present, those missing, their lag; `runs watch`: late hours as they happen",
    () => import('./commands/runs.js'),
  ],
  [
    'reconcile',
    'what the forecast API says a webhook should have been sent, against what was processed here; --catch-up hands over what is missing, once; exit 11 if something is',
    () => import('./commands/reconcile.js'),
  ],
  ['verify', 'check a captured delivery offline: which signature layout matched, or why none did', () => import('./commands/verify.js')],
  ['send', 'sign and POST one delivery, as the service would, to any receiver (to test your own endpoint)', () => import('./commands/send.js')],
  ['mcp', 'an MCP server over stdio for a coding agent: the deliveries of a running listen, replay, verify, send, the service', () => import('./commands/mcp.js')],
  ['secret', 'the local store of webhook secrets (keyed by base URL and webhook id)', () => import('./commands/secret.js')],
  ['relay', 'a relay of your own (a Cloudflare Worker, or a small VM): the service posts to it, listen --relay takes from it', () => import('./commands/relay.js')],
  ['emulator', 'run a local copy of the service: the whole API (its forecast API too), signed deliveries, retries', () => import('./commands/emulator.js')],
  ['trigger', 'make the emulator publish an event, or a whole model run (refuses anything but an emulator)', () => import('./commands/trigger.js')],
  ['config', 'settings kept in the store (the API key is never stored)', () => import('./commands/config.js')],
  ['completion', 'print a shell completion script', () => import('./commands/completion.js')],
];

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
  // a completion script needs the whole tree; the webhook ids it asks for at each Tab need only the store
  return name === 'completion' && !args.includes('--webhook-ids') ? '*' : name;
}

/** commander's action for a command: builds the command's context from the I/O and the global flags. */
function actFor(io: Io): Act {
  return (run, options = {}) =>
    async (...args: unknown[]) => {
      const cmd = args[args.length - 1] as Command;
      const flags = cmd.optsWithGlobals() as GlobalFlags;
      if (options.longRunning) io.longRunning?.();
      const ctx: Context = {
        env: io.env,
        stdout: io.stdout,
        stderr: io.stderr,
        stdin: io.stdin,
        global: {
          baseUrl: flags.baseUrl,
          auth: flags.auth,
          json: Boolean(flags.json),
          verbose: Boolean(flags.verbose),
          timeoutMs: flags.timeout,
          color: flags.color,
        },
        interrupted: options.longRunning ? io.interrupted : new Promise(() => undefined),
        setRecoveryHint: (hint) => io.setRecoveryHint?.(hint),
        given: (option) => {
          const source = cmd.getOptionValueSourceWithGlobals(option);
          return source === 'cli' || source === 'env';
        },
        clock: io.clock ?? systemClock,
        serviceFactory: io.serviceFactory,
        retryBaseMs: io.retryBaseMs,
      };
      await run(ctx, ...args.slice(0, -1));
    };
}

/** Help text with its "Commands:" section moved before its "Global Options:" section. */
function commandsBeforeGlobals(text: string): string {
  const globals = /\nGlobal Options:\n[\s\S]*?(?=\n[A-Z][A-Za-z ]*:\n|\n*$)/.exec(text);
  const commands = /\nCommands:\n[\s\S]*?(?=\n[A-Z][A-Za-z ]*:\n|\n*$)/.exec(text);
  if (!globals || !commands || commands.index < globals.index) return text;
  return text.replace(commands[0], '').replace(globals[0], `${commands[0]}\n${globals[0]}`);
}

/** The exit codes for the help, from their table (src/errors.ts), wrapped at 100 columns. */
function exitCodeHelp(): string {
  const lines = ['Exit codes:'];
  for (const [code, words] of Object.entries(EXIT_CODE_WORDS)) {
    const part = ` ${code} ${words},`;
    if (lines.at(-1)!.length + part.length > 100) lines.push('           ');
    lines[lines.length - 1] += part;
  }
  return lines.join('\n').replace(/,$/, '.');
}

/**
 * The commander program. Only the command group being run is loaded and
 * declared in full; the others are listed by name and summary, which is all
 * `--help` shows of them. `act` (tests) replaces what runs a command.
 */
export async function buildProgram(argv: string[], io: Io, act: Act = actFor(io)): Promise<Command> {
  const wanted = requestedGroup(argv.slice(2));
  const [{ Command, Help, Option }, { valued, msDefault }, { timeLimit }, DEFAULTS, ...loaded] = await Promise.all([
    import('commander'),
    import('./flags/options.js'),
    import('./util/parse.js'),
    import('./delivery/defaults.js'),
    ...GROUPS.map(([name, , load]) => (wanted === '*' || wanted === name ? load() : undefined)),
  ]);
  const program = new Command('wxhooks').description("Manage, receive, verify and emulate the weather forecast service's webhooks.").version(version(), '-V, --version', 'print the version');
  for (const [flags, description] of GLOBAL_OPTIONS) {
    if (flags.startsWith('--auth')) program.addOption(new Option(flags, description).choices(['auto', 'bearer', 'basic']));
    else if (flags.startsWith('--timeout')) program.addOption(valued(flags, description, timeLimit, msDefault(DEFAULTS.requestTimeoutMs)));
    else program.option(flags, description);
  }
  program
    .helpOption('-h, --help', 'show help')
    .configureHelp({
      showGlobalOptions: true,
      sortSubcommands: false,
      // a group's commands first, then the options every command takes (commander puts them the other way round)
      formatHelp: (cmd, helper) => commandsBeforeGlobals(Help.prototype.formatHelp.call(helper, cmd, helper)),
    })
    .configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) })
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

Environment: WX_API_KEY (else WB_API_KEY), WX_BASE_URL, WX_CLIENT_ID (else WB_CLIENT_ID, legacy keys only),
             WXHOOKS_CONFIG_DIR.
${exitCodeHelp()}`,
    );

  GROUPS.forEach(([name, summary], i) => {
    const cmd = program.command(name).description(summary);
    loaded[i]?.register(cmd, act);
  });
  // every sub-command writes where the program does
  const route = (cmd: Command) => {
    cmd.configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) });
    cmd.commands.forEach(route);
  };
  route(program);
  return program;
}

async function printError(err: unknown, verbose: boolean, io: Io, color: boolean): Promise<number> {
  const [{ redact }, { printable }, { styleFor }] = await Promise.all([import('./util/redact.js'), import('./util/printable.js'), import('./output/style.js')]);
  const style = styleFor({ env: io.env, global: { color } }, io.stderr);
  // What an error says may quote the service: its control characters are shown escaped (line by line,
  // so a stack keeps its lines), its secrets never. The label's colour is ours.
  const write = (label: string, text: string) => io.stderr.write(`${label}${redact(text.split('\n').map(printable).join('\n'))}\n`);
  if (err instanceof WxError) {
    if (err instanceof InterruptedError) {
      if (err.signal === 'EPIPE') io.stderr.write(`wxhooks: stdout was closed by its reader (EPIPE): stopped after answering and storing what was in flight (exit ${err.exitCode}).\n`);
      return err.exitCode;
    }
    if (err instanceof SecretNotSavedError) {
      // The one place a secret is printed outside `secret show`: it would be lost otherwise.
      io.stderr.write(`\n${style.bold('The webhook was created, but its secret could not be stored. Keep it now; it is shown only this once:')}\n\n  ${err.secret}\n\n`);
    }
    write(`${style.red('error:')} `, err.message);
    if (err.hint) write(`${style.dim('hint:')} `, err.hint);
    if (verbose && err.stack) write('', err.stack);
    if (verbose && err.cause instanceof Error && err.cause.stack) write('caused by: ', err.cause.stack);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  write(`${style.red('error:')} `, `unexpected: ${message}`);
  if (verbose && err instanceof Error && err.stack) write('', err.stack);
  else write(`${style.dim('hint:')} `, 'this is a bug in wxhooks; run again with --verbose for the stack, and report it.');
  return ExitCode.UNEXPECTED;
}

/** `wxhooks [words] --help` from the pre-rendered texts (src/help.ts), or undefined to let commander do it. */
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

/**
 * What argv would run, without running it: the run function and the arguments it would get (positionals,
 * then the parsed options). The first half of a command's tests (argv in, options out).
 */
export async function parseArgs(argv: string[], io: Io): Promise<{ run: Run; args: unknown[] }> {
  let parsed: { run: Run; args: unknown[] } | undefined;
  const record: Act =
    (run) =>
    async (...args: unknown[]) => {
      parsed = { run, args: args.slice(0, -1) };
    };
  const program = await buildProgram(argv, io, record);
  await program.parseAsync(argv);
  if (!parsed) throw new Error(`${argv.slice(2).join(' ')} runs no command`);
  return parsed;
}

/** Parses argv, runs the command, and returns the exit code. Never exits by itself. */
export async function main(argv: string[], io: Io): Promise<number> {
  const args = argv.slice(2);
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
    // the fast path: nothing but the version
    io.stdout.write(`${version()}\n`);
    return ExitCode.OK;
  }
  const help = await prerenderedHelp(args);
  if (help !== undefined) {
    io.stdout.write(help);
    return ExitCode.OK;
  }
  try {
    const program = await buildProgram(argv, io);
    await program.parseAsync(argv);
    return ExitCode.OK;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('commander.')) {
      // commander printed its own message; help and --version exit 0, parse errors are usage errors
      return (err as { exitCode: number }).exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    }
    return printError(err, argv.includes('--verbose'), io, !argv.includes('--no-color'));
  }
}

/** The binary's entry: the process as the I/O, Ctrl-C handling, then exit with main's code once output is flushed. */
export async function run(): Promise<void> {
  let interrupt: ((why: StopReason) => void) | undefined;
  let longRunning = false;
  let recoveryHint: string | undefined;
  const interrupted = new Promise<StopReason>((resolve) => (interrupt = resolve));
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (longRunning && signals === 1) interrupt?.(signal);
    else process.exit(signal === 'SIGINT' ? ExitCode.INTERRUPTED : 128 + (signal === 'SIGHUP' ? 1 : 15));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  let outputClosed = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    // A long-running command (listen) closes in order, so that what it answered is stored: then exit 141.
    if (longRunning && err.code === 'EPIPE') {
      if (!outputClosed) interrupt?.('EPIPE');
      outputClosed = true;
      return;
    }
    // A closed pipe (`| head`): what was not printed is lost, so say how to get it back.
    if (recoveryHint) process.stderr.write(`wxhooks: the output was cut short (${err.code ?? err.message}); ${recoveryHint}\n`);
    process.exit(err.code === 'EPIPE' ? ExitCode.OK : ExitCode.UNEXPECTED);
  });
  const code = await main(process.argv, {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    get stdin() {
      return process.stdin;
    },
    interrupted,
    longRunning: () => (longRunning = true),
    setRecoveryHint: (hint) => (recoveryHint = hint),
  });
  const flush = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => (s.writableLength && !s.destroyed ? s.write('', () => resolve()) : resolve()));
  await Promise.all([outputClosed ? undefined : flush(process.stdout), flush(process.stderr)]);
  process.exit(code);
}
