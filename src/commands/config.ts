import type { Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';

export function register(config: Command, act: Act): void {
  config
    .addHelpText(
      'after',
      `
Settings:
  base-url   the service address used when neither --base-url nor WX_BASE_URL is given

Examples:
  $ wxhooks config set base-url http://127.0.0.1:8788
  $ wxhooks config get base-url
  $ wxhooks config list --json
  $ wxhooks config path`,
    );
  config.command('get').description('print one setting').argument('<key>').action(act(runConfigGet));
  config.command('set').description('store one setting').argument('<key>').argument('<value>').action(act(runConfigSet));
  config.command('unset').description('forget one setting').argument('<key>').action(act(runConfigUnset));
  config.command('list').description('every stored setting').action(act(runConfigList));
  config.command('path').description('where the settings and secrets live').action(act(runConfigPath));
}

async function settings(ctx: Context) {
  const { Settings } = await import('../store/settings.js');
  return new Settings(ctx.env);
}

async function out(ctx: Context, json: unknown, text: string): Promise<void> {
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(ctx.stdout, json);
  } else line(ctx.stdout, text);
}

export async function runConfigGet(ctx: Context, key: string): Promise<void> {
  const value = (await settings(ctx)).get(key);
  if (value === undefined && !ctx.global.json) {
    line(ctx.stderr, `${key} is not set.`);
    return;
  }
  await out(ctx, { [key]: value ?? null }, value ?? '');
}

export async function runConfigSet(ctx: Context, key: string, value: string): Promise<void> {
  const stored = (await settings(ctx)).set(key, value);
  await out(ctx, { [key]: stored }, `${key} = ${stored}`);
}

export async function runConfigUnset(ctx: Context, key: string): Promise<void> {
  (await settings(ctx)).unset(key);
  await out(ctx, { [key]: null }, `${key} unset`);
}

export async function runConfigList(ctx: Context): Promise<void> {
  const all = (await settings(ctx)).all();
  const text = Object.entries(all)
    .map(([k, v]) => `${k} = ${v}`)
    .join('\n');
  await out(ctx, all, text || '(no settings stored)');
}

export async function runConfigPath(ctx: Context): Promise<void> {
  const { configDir } = await import('../store/paths.js');
  const { join } = await import('node:path');
  const dir = configDir(ctx.env);
  await out(
    ctx,
    { dir, settings: join(dir, 'settings.json'), secrets: join(dir, 'secrets.json') },
    dir,
  );
}
