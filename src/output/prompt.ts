import { createInterface } from 'node:readline';
import type { Context } from '../context.js';
import { InterruptedError, UsageError } from '../errors.js';

export const interactive = (ctx: Context): boolean => Boolean(ctx.stdin.isTTY && ctx.stderr.isTTY);

/** Asks a yes/no question on the terminal; without one, `--yes` is required. */
export async function confirm(ctx: Context, question: string, yes: boolean | undefined, flagHint: string): Promise<boolean> {
  if (yes) return true;
  if (!interactive(ctx)) {
    throw new UsageError(`${question.replace(/\?$/, '')}: needs --yes when not run in a terminal.`, { hint: `Add --yes: ${flagHint}` });
  }
  const rl = createInterface({ input: ctx.stdin, output: ctx.stderr as NodeJS.WritableStream });
  let answered = false;
  try {
    const answer = await new Promise<string>((resolve, reject) => {
      // Ctrl-C, or Ctrl-D (the end of input) before an answer: interrupted (exit 130), the shell's prompt on a line of its own
      const stop = () => {
        if (answered) return;
        answered = true;
        ctx.stderr.write('\n');
        reject(new InterruptedError('SIGINT'));
      };
      rl.on('SIGINT', stop);
      rl.on('close', stop);
      rl.question(`${question} [y/N] `, (text) => {
        answered = true;
        resolve(text);
      });
    });
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/**
 * Reads one line typed or pasted on the terminal without showing it (a secret): Enter or Ctrl-D ends
 * it, Backspace takes back a character, Ctrl-C interrupts. Other control keys are ignored.
 */
export function readHidden(ctx: Context, prompt: string): Promise<string> {
  const input = ctx.stdin as NodeJS.ReadStream;
  input.setRawMode(true); // before the prompt, so nothing typed after it is echoed
  ctx.stderr.write(prompt);
  input.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let value = '';
    const done = (err?: Error) => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.setRawMode(false);
      input.pause();
      ctx.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (text: string) => {
      for (const ch of text) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done();
        if (ch === '\u0003') return done(new InterruptedError('SIGINT'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else if (ch >= ' ') value += ch;
      }
    };
    const onEnd = () => done();
    input.on('data', onData);
    input.once('end', onEnd);
    input.resume();
  });
}
