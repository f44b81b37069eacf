import { Command, CommanderError, Option } from 'commander';
import type { AuthScheme, Context } from './context.js';
import { ExitCode, WxError } from './errors.js';
import { parseDuration } from './util/duration.js';
import { version } from './version.js';
import { registerAuth } from './commands/auth.js';
import { registerCompletion } from './commands/completion.js';
import { registerConfig } from './commands/config.js';
import { registerEmulator } from './commands/emulator.js';
import { registerListen } from './commands/listen.js';
import { registerTrigger } from './commands/trigger.js';
import { registerPing } from './commands/ping.js';
import { registerSecret } from './commands/secret.js';
import { registerSend } from './commands/send.js';
import { registerVerify } from './commands/verify.js';
import { registerSubscription } from './commands/subscription.js';
import { registerWebhook } from './commands/webhook.js';

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
      timeoutMs: parseDuration(flags.timeout, '--timeout'),
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

export function buildProgram(): Command {
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

  registerAuth(program, act);
  registerWebhook(program, act);
  registerSubscription(program, act);
  registerPing(program, act);
  registerListen(program, act);
  registerVerify(program, act);
  registerSend(program, act);
  registerSecret(program, act);
  registerEmulator(program, act);
  registerTrigger(program, act);
  registerConfig(program, act);
  registerCompletion(program, act);
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
export async function main(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return ExitCode.OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
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
