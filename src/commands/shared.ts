import type { Command } from 'commander';
import { resolveBaseUrl, type ResolvedBaseUrl } from '../api/base-url.js';
import { resolveCredentials, type Credentials } from '../api/credentials.js';
import { HttpClient, proxyConfigured } from '../api/http.js';
import { Service } from '../api/service.js';
import { line, type Context } from '../context.js';
import { NotFoundError, UsageError } from '../errors.js';
import { configDir } from '../store/paths.js';
import { readSetting } from '../store/settings.js';
import type { SecretStore } from '../store/secrets.js';
import { readStdin } from '../util/input.js';
import { identifier } from '../util/parse.js';
import { addSensitive } from '../util/redact.js';
import { isKnownType, RESPONSE_TYPES, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';
import { printable } from '../util/printable.js';
import { valued } from './options.js';

export async function baseUrlFor(ctx: Context): Promise<ResolvedBaseUrl> {
  const needStored = ctx.global.baseUrl === undefined && !ctx.env.WX_BASE_URL;
  const stored = needStored ? await readSetting(ctx.env, 'base-url') : undefined;
  return resolveBaseUrl(ctx.global.baseUrl, ctx.env.WX_BASE_URL, () => stored);
}

export async function serviceFor(ctx: Context): Promise<{ service: Service; base: ResolvedBaseUrl; credentials: Credentials }> {
  if (ctx.serviceFactory) return ctx.serviceFactory(ctx);
  const credentials = resolveCredentials(ctx.env, ctx.global.auth ?? 'auto', () => ctx.clock.now());
  credentials.secrets.forEach(addSensitive);
  const base = await baseUrlFor(ctx);
  const http = new HttpClient({
    baseUrl: base.url,
    credentials,
    timeoutMs: ctx.global.timeoutMs,
    log: ctx.global.verbose ? (text) => line(ctx.stderr, text) : undefined,
    retryBaseMs: ctx.retryBaseMs,
    proxy: proxyConfigured(ctx.env),
  });
  return { service: new Service(http), base, credentials };
}

/** The secret store; loaded only by the commands that use it (its lock library patches fs on load). */
export async function secretStoreFor(ctx: Context): Promise<SecretStore> {
  const { SecretStore } = await import('../store/secrets.js');
  return new SecretStore(configDir(ctx.env), (text) => line(ctx.stderr, `warning: ${text}`));
}

/** Warns, on stderr, about subscription types wxhooks does not know: they are sent anyway, since the service may know more. */
export function warnUnknownTypes(ctx: Context, types: readonly string[]): void {
  for (const t of types) {
    if (!isKnownType(t)) line(ctx.stderr, `warning: "${printable(t)}" is not a subscription type wxhooks knows (${suggestion(t, SUBSCRIPTION_TYPES)}); sending it anyway.`);
  }
}

/** Warns, on stderr, about response types wxhooks does not know: sent anyway, as for subscription types. */
export function warnUnknownResponses(ctx: Context, responses: readonly (string | undefined)[]): void {
  for (const r of responses) {
    if (r !== undefined && !(RESPONSE_TYPES as readonly string[]).includes(r)) {
      line(ctx.stderr, `warning: "${printable(r)}" is not a response type wxhooks knows (${suggestion(r, RESPONSE_TYPES)}); sending it anyway.`);
    }
  }
}

/** `--webhook ID` and `--secret-env VAR`: where a command that verifies or signs takes its secret from. */
export function secretSourceOptions(cmd: Command, verb: string): Command {
  return cmd
    .addOption(valued('--webhook <id>', `${verb} this webhook's stored secret`, identifier))
    .option('--secret-env <var>', `${verb} the secret in this environment variable (several: space-separated)`);
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

/** --dir or --store: where `listen` kept what it received. */
export function deliverySourceOptions(cmd: Command): Command {
  return cmd
    .option('--dir <dir>', 'a folder that `listen --save-dir` wrote to')
    .option('--store <url>', "or the receivers' shared PostgreSQL store, its history (else WXHOOKS_STORE_URL)")
    .option('--store-schema <name>', 'with --store: the schema its tables are in', 'wxhooks');
}
