import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { chromiumPaths, launchBrowserServer, pgBin, startNats, startPostgres, startRedis, type Broker, type Postgres } from '../../scripts/harness.js';

const ROOT = resolve(import.meta.dirname, '../..');

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
  {
    name: 'GNU time (/usr/bin/time)',
    why: "a save-dir test measures the CLI's peak memory with it",
    how: 'apt-get install time',
    found: () => existsSync('/usr/bin/time'),
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
    `npm run test:all drives ${missing.length === 1 ? 'a program that is' : `${missing.length} programs that are`} not on this machine:`,
    ...missing.map((c) => `  - ${c.name} (${c.why}): get it with ${c.how}`),
    'On Debian, .ci/run installs what is missing (as root), then runs the tests.',
  ].join('\n');
}

/** The services the full tier's files share, as `inject` gives them (see test/helpers/services.ts). */
declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's PostgreSQL server: each file makes a database of its own on it. */
    postgres: { url: string; password: string; port: number };
    /** The run's NATS server (JetStream) and Redis server: each file names its streams and keys apart. */
    nats: { url: string; password: string; port: number };
    redis: { url: string; password: string; port: number };
    /** One Chromium per worker (index: VITEST_POOL_ID - 1), each file in a context of its own. */
    chromium: string[];
  }
}

/**
 * Before the full tier's first test: what it needs is all here (else one message that says what is
 * missing, rather than dozens of failures); then its services, started once for the run and in parallel:
 * one PostgreSQL, one NATS, one Redis, and a Chromium for each worker. A test that restarts or kills a
 * server starts one of its own (scripts/harness.js). Here no hook timeout applies: a slow start on a busy
 * machine is waited for by each service's own readiness (and its own bound, which says what did not come).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const missing = missingComponents();
  if (missing) {
    // one message and stop: vitest would add its stack of the throw, and nothing else is worth saying
    process.stderr.write(`\n${missing}\n\n`);
    process.exit(1);
  }
  const workers = Math.max(1, Number(project.globalConfig.maxWorkers) || 1);
  const started: { stop(): Promise<unknown> }[] = [];
  const keep = async <T extends { stop(): Promise<unknown> }>(service: Promise<T>): Promise<T> => {
    const s = await service;
    started.push(s);
    return s;
  };
  const stopAll = async () => {
    await Promise.allSettled(started.map((s) => s.stop()));
  };
  try {
    const [postgres, nats, redis, ...browsers] = await Promise.all([
      keep(startPostgres().then((pg: Postgres) => ({ ...pick(pg), stop: () => pg.remove() }))),
      keep(startNats().then((b: Broker) => ({ ...pick(b), stop: () => b.remove() }))),
      keep(startRedis().then((b: Broker) => ({ ...pick(b), stop: () => b.remove() }))),
      ...Array.from({ length: workers }, () => keep(launchBrowserServer().then((b) => ({ endpoint: b.wsEndpoint(), stop: () => b.close() })))),
    ]);
    project.provide('postgres', pick(postgres));
    project.provide('nats', pick(nats));
    project.provide('redis', pick(redis));
    project.provide(
      'chromium',
      browsers.map((b) => b.endpoint),
    );
  } catch (err) {
    await stopAll();
    throw err;
  }
  return stopAll;
}

/** What a file is given of a server: where it is and its password, not the means to stop it. */
function pick(s: { url: string; password: string; port: number }): { url: string; password: string; port: number } {
  return { url: s.url, password: s.password, port: s.port };
}
