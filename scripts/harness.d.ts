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
export function clickToDetail(): Promise<number>;
