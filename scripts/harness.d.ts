export function freePort(): Promise<number>;
export function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void;
export interface Postgres {
  url: string;
  password: string;
  port: number;
  readonly pid: number;
  restart(pauseMs?: number): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  remove(): Promise<void>;
}
export function startPostgres(): Promise<Postgres>;
export function pgBin(env?: Record<string, string | undefined>, root?: string): string | undefined;
export function chromiumPaths(env?: Record<string, string | undefined>, debian?: string): string[];
export function launchBrowser(): Promise<import('playwright-core').Browser>;
export function launchBrowserServer(): Promise<import('playwright-core').BrowserServer>;
export function clickToDetail(): Promise<number>;
/** A throwaway broker server (NATS with JetStream, or Redis) for the sinks' tests and benchmark. */
export interface Broker {
  /** Without a path: add `/SUBJECT` or `/STREAM`. Carries the password. */
  url: string;
  password: string;
  port: number;
  readonly pid: number;
  /** Stops it (SIGTERM, an orderly stop) and starts it again on the same port and folder. */
  restart(pauseMs?: number): Promise<void>;
  stop(): Promise<void>;
  /** Stops it with SIGKILL. */
  kill(): Promise<void>;
  start(): Promise<void>;
  remove(): Promise<void>;
}
export function startNats(options?: { jetstream?: boolean }): Promise<Broker>;
export function startRedis(): Promise<Broker>;
