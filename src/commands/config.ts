import { join } from 'node:path';
import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { emit } from '../output/render.js';
import { configDir } from '../store/paths.js';

export function register(config: Command, act: Act): void {
  config.addHelpText(
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

/** The settings, read and written: loaded only here, since every other command reads the one setting it needs directly. */
async function settings(ctx: Context) {
  const { Settings } = await import('../store/settings.js');
  return Settings.open(ctx.env);
}

export async function runConfigGet(ctx: Context, key: string): Promise<void> {
  const value = await (await settings(ctx)).get(key);
  if (value === undefined && !ctx.global.json) {
    line(ctx.stderr, `${key} is not set.`);
    return;
  }
  emit(ctx, { [key]: value ?? null }, () => value ?? '');
}

export async function runConfigSet(ctx: Context, key: string, value: string): Promise<void> {
  const stored = await (await settings(ctx)).set(key, value);
  emit(ctx, { [key]: stored }, () => `${key} = ${stored}`);
}

export async function runConfigUnset(ctx: Context, key: string): Promise<void> {
  await (await settings(ctx)).unset(key);
  emit(ctx, { [key]: null }, () => `${key} unset`);
}

export async function runConfigList(ctx: Context): Promise<void> {
  const all = await (await settings(ctx)).all();
  const text = Object.entries(all)
    .map(([k, v]) => `${k} = ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
  emit(ctx, all, () => text || '(no settings stored)');
}

export async function runConfigPath(ctx: Context): Promise<void> {
  const dir = configDir(ctx.env);
  emit(ctx, { dir, settings: join(dir, 'settings.json'), secrets: join(dir, 'secrets.json'), processed_pairs: join(dir, 'processed-pairs.ndjson') }, () => dir);
}
