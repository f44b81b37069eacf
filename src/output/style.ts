import { Chalk, type ChalkInstance } from 'chalk';
import type { Context, Out } from '../context.js';

/** Colours for one stream, following NO_COLOR, FORCE_COLOR, --no-color and whether the stream is a terminal. */
export function styleFor(ctx: { env: Context['env']; global: Pick<Context['global'], 'color'> }, out: Out): ChalkInstance {
  const force = ctx.env.FORCE_COLOR;
  let level: 0 | 1 | 2 | 3 = 0;
  if (!ctx.global.color) level = 0;
  else if (force !== undefined && force !== '0' && force !== 'false') level = force === '2' ? 2 : force === '3' ? 3 : 1;
  else if (ctx.env.NO_COLOR) level = 0;
  else if (out.isTTY) level = ctx.env.COLORTERM === 'truecolor' ? 3 : 1;
  return new Chalk({ level });
}

/** The colours a formatter uses (a ChalkInstance: at level 0, the text as it is). */
export type Style = Pick<ChalkInstance, 'green' | 'yellow' | 'red' | 'blue' | 'cyan' | 'dim' | 'bold'>;
