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

type Paint = (text: string) => string;

/** The colours a formatter uses: a ChalkInstance, or PLAIN. */
export interface Style {
  green: Paint;
  yellow: Paint;
  red: Paint;
  blue: Paint;
  cyan: Paint;
  dim: Paint;
  bold: Paint;
}

const same: Paint = (text) => text;

/** No colours, without chalk's work per call: for a line written per request when there are no colours. */
export const PLAIN: Style = { green: same, yellow: same, red: same, blue: same, cyan: same, dim: same, bold: same };
