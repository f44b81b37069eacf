import { line, type Context } from '../context.js';
import { NotFoundError, UsageError } from '../errors.js';
import { configDir } from '../store/paths.js';
import type { SecretStore } from '../store/secrets.js';
import { readStdin } from '../util/input.js';
import { baseUrlFor } from './service.js';

/** The secret store; loaded only by the commands that use it (its lock library patches fs on load). */
export async function secretStoreFor(ctx: Context): Promise<SecretStore> {
  const { SecretStore } = await import('../store/secrets.js');
  return new SecretStore(configDir(ctx.env), (text) => line(ctx.stderr, `warning: ${text}`));
}

export interface SecretSource {
  webhook?: string;
  secretEnv?: string;
  /** The command, for the example in the advice (`deliveries replay`, `listen`...). */
  command: string;
}

/**
 * The secret(s) to verify or sign with: from the store (`--webhook ID`), from
 * an environment variable (`--secret-env VAR`), or from stdin; never a flag.
 * Several secrets (a rotation) may be given separated by spaces or commas.
 */
export async function resolveSecrets(ctx: Context, source: SecretSource): Promise<{ secrets: string[]; from: string }> {
  const split = (text: string) => text.split(/[\s,]+/).filter(Boolean);
  if (source.webhook !== undefined && source.secretEnv !== undefined) {
    throw new UsageError('Give either --webhook or --secret-env, not both.');
  }
  if (source.webhook !== undefined) {
    const base = await baseUrlFor(ctx);
    const entry = await (await secretStoreFor(ctx)).get(base.url, source.webhook);
    if (!entry) {
      throw new NotFoundError(`No secret is stored for webhook ${source.webhook} at ${base.url}.`, {
        hint: `\`wxhooks secret list\` shows what is stored; store one with \`wxhooks secret set ${source.webhook}\`, or use --secret-env VAR.`,
      });
    }
    return { secrets: [entry.secret], from: `the stored secret of webhook ${source.webhook}` };
  }
  if (source.secretEnv !== undefined) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(source.secretEnv)) {
      throw new UsageError('--secret-env takes the NAME of an environment variable (letters, digits and _), not a secret.', {
        hint: 'For example: export WX_WEBHOOK_SECRET=whsec_... then --secret-env WX_WEBHOOK_SECRET',
      });
    }
    const value = ctx.env[source.secretEnv];
    if (!value?.trim()) throw new UsageError(`The environment variable ${source.secretEnv} is ${value === undefined ? 'not set' : 'empty'}.`);
    return { secrets: split(value), from: `$${source.secretEnv}` };
  }
  if (ctx.stdin.isTTY) {
    throw new UsageError('A secret is needed: --webhook ID (from the store), --secret-env VAR, or pipe it on stdin.', {
      hint: `For example: wxhooks ${source.command} --webhook 7, or wxhooks secret show 7 | wxhooks ${source.command}`,
    });
  }
  const secrets = split(await readStdin(ctx.stdin));
  if (!secrets.length) {
    throw new UsageError('No secret was given: stdin was empty.', { hint: 'Use --webhook ID (from the store) or --secret-env VAR, or pipe the secret on stdin.' });
  }
  return { secrets, from: 'stdin' };
}
