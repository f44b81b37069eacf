import type { Context } from '../context.js';

export interface Spinner {
  stop(): void;
}

/** An ora spinner on stderr, only when stderr is a terminal and --json is off. */
export async function startSpinner(ctx: Context, text: string): Promise<Spinner> {
  // A terminal that reports no width (some pseudo-terminals) would make ora clear lines forever.
  if (!ctx.stderr.isTTY || ctx.global.json || ctx.global.verbose || !((ctx.stderr.columns ?? 0) > 0)) return { stop() {} };
  const { default: ora } = await import('ora');
  const spinner = ora({ text, stream: ctx.stderr as NodeJS.WritableStream, discardStdin: false }).start();
  return { stop: () => spinner.stop() };
}

export async function withSpinner<T>(ctx: Context, text: string, work: () => Promise<T>): Promise<T> {
  const spinner = await startSpinner(ctx, text);
  try {
    return await work();
  } finally {
    spinner.stop();
  }
}
