import { accessSync, constants, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { chromiumPaths, pgBin } from '../scripts/harness.js';

const ROOT = resolve(import.meta.dirname, '..');

/** What the suite drives besides Node and npm: what it is for, and how to get it. */
interface Component {
  name: string;
  why: string;
  /** How to get it, after "get it with". */
  how: string;
  found(env: NodeJS.ProcessEnv): boolean;
}

/** Whether an executable of this name is on the PATH (as `command -v` would say). */
function onPath(command: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

const command = (name: string, why: string, debian = name): Component => ({ name, why, how: `apt-get install ${debian}`, found: (env) => onPath(name, env) });
/** A binary an npm package of the project brings: there after `npm ci`. */
const fromNpm = (name: string, file: string, why: string): Component => ({ name, why, how: 'npm ci', found: () => existsSync(join(ROOT, 'node_modules', file)) });

export const COMPONENTS: Component[] = [
  command('bash', 'the completion tests'),
  command('zsh', "the completion tests run zsh's own completion"),
  command('fish', "the completion tests run fish's own completion"),
  command('python3', 'the terminal tests run commands on a pseudo-terminal', 'python3'),
  {
    name: 'chromium',
    why: "the inspector's tests drive a headless Chromium",
    how: 'apt-get install chromium, or set CHROMIUM_PATH',
    found: (env) => chromiumPaths(env).length > 0,
  },
  {
    name: 'PostgreSQL server binaries (initdb, postgres)',
    why: 'the shared-store tests start a throwaway server',
    how: 'apt-get install postgresql, or set PG_BIN',
    found: (env) => pgBin(env) !== undefined,
  },
  command('nats-server', "the sinks' tests start a NATS server with JetStream"),
  command('redis-server', "the sinks' tests start a Redis server", 'redis-server'),
  command('prometheus', 'the metrics tests start a Prometheus server that scrapes listen and relay serve'),
  fromNpm('deno', 'deno/package.json', "the handler library's tests run its examples in Deno"),
  fromNpm('bun', 'bun/package.json', "the handler library's tests run its examples in Bun"),
  fromNpm('workerd', 'workerd/package.json', "the handler library's tests run its Worker in workerd"),
  { name: 'the built CLI (dist/)', why: 'the end-to-end tests run the built binary', how: 'npm run build (npm test builds first)', found: () => existsSync(join(ROOT, 'dist/bin/cli.js')) },
];

/**
 * What is missing, in one message that names each thing and how to get it; undefined when nothing is.
 * `components` for the tests of this check.
 */
export function missingComponents(env: NodeJS.ProcessEnv = process.env, components = COMPONENTS): string | undefined {
  const missing = components.filter((c) => !c.found(env));
  if (!missing.length) return undefined;
  return [
    `npm test drives ${missing.length === 1 ? 'a program that is' : `${missing.length} programs that are`} not on this machine:`,
    ...missing.map((c) => `  - ${c.name} (${c.why}): get it with ${c.how}`),
    'On Debian, .ci/run installs what is missing (as root), then runs the tests.',
  ].join('\n');
}

/**
 * Before any test: what the suite needs is all here (else one message that says what is missing, rather
 * than dozens of failures), and one folder for every temporary file of the run, removed at the end (the
 * workers inherit its path).
 */
export default function setup(): () => void {
  const missing = missingComponents();
  if (missing) {
    // one message and stop: vitest would add its stack of the throw, and nothing else is worth saying
    process.stderr.write(`\n${missing}\n\n`);
    process.exit(1);
  }
  const root = mkdtempSync(join(tmpdir(), 'wxhooks-tests-'));
  process.env.WXHOOKS_TEST_TMP = root;
  return () => rmSync(root, { recursive: true, force: true });
}
