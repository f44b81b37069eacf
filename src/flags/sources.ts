import type { Command } from 'commander';
import { identifier } from '../util/parse.js';
import { valued } from './options.js';
import * as DEFAULTS from '../delivery/defaults.js';

/** `--webhook ID` and `--secret-env VAR`: where a command that verifies or signs takes its secret from. */
export function secretSourceOptions(cmd: Command, verb: string): Command {
  return cmd
    .addOption(valued('--webhook <id>', `${verb} this webhook's stored secret`, identifier))
    .option('--secret-env <var>', `${verb} the secret in this environment variable (several: space-separated)`);
}

/** --dir or --store: where `listen` kept what it received. */
export function deliverySourceOptions(cmd: Command): Command {
  return cmd
    .option('--dir <dir>', 'a folder that `listen --save-dir` wrote to')
    .option('--store <url>', "or the receivers' shared PostgreSQL store, its history (else WXHOOKS_STORE_URL)")
    .option('--store-schema <name>', 'with --store: the schema its tables are in', DEFAULTS.schema);
}
