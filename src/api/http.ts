import type { Dispatcher } from 'undici';
import { AuthError, NotFoundError, RefusedError, UnreachableError, type WxError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import { networkReason } from '../util/net.js';
import { redact } from '../util/redact.js';
import { userAgent } from '../version.js';
import type { Credentials } from './credentials.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

export interface HttpClientOptions {
  baseUrl: string;
  credentials: Credentials;
  /** The deadline for one call, retries included. */
  timeoutMs: number;
  /** Receives one line per attempt when set (`--verbose`). Already redacted. */
  log?: (line: string) => void;
  /** How many times a GET is retried (default 3). */
  maxRetries?: number;
  /** The first retry delay; later ones grow (default 250 ms). */
  retryBaseMs?: number;
  /**
   * Send through undici with this dispatcher. Without one, requests go through
   * node:http(s) with a keep-alive agent, unless `proxy` is set, when undici's
   * EnvHttpProxyAgent is used. (undici, and Node's fetch, which is undici, compile
   * a WebAssembly HTTP parser in every new process: 60-80 ms on a 2-core machine,
   * which a command run hundreds of times a day should not pay.)
   */
  dispatcher?: Dispatcher;
  /** HTTP(S)_PROXY is set (in the command's environment): route requests through undici's EnvHttpProxyAgent, which honours NO_PROXY. */
  proxy?: ProxySettings;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** What a 404 means, for the message: "webhook 42". */
  subject?: string;
  /** The hint a failed write carries (check the state before repeating it). */
  writeHint?: string;
}

export interface HttpResponse<T = unknown> {
  status: number;
  data: T;
}

const RETRYABLE_STATUS = new Set([502, 503, 504]);
const MAX_RETRY_AFTER_MS = 60_000;

/** The proxies a command's environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, in either case). */
export interface ProxySettings {
  httpProxy?: string;
  httpsProxy?: string;
  noProxy?: string;
}

const proxyDispatchers = new Map<string, Promise<Dispatcher>>();
/** One keep-alive proxy agent per proxy settings, given the command's environment rather than reading the process's. */
function proxyDispatcher(settings: ProxySettings): Promise<Dispatcher> {
  const key = JSON.stringify(settings);
  let dispatcher = proxyDispatchers.get(key);
  if (!dispatcher) proxyDispatchers.set(key, (dispatcher = import('undici').then(({ EnvHttpProxyAgent }) => new EnvHttpProxyAgent(settings))));
  return dispatcher;
}

/** The proxy settings of an environment, or undefined when it names no proxy. */
export function proxyConfigured(env: Record<string, string | undefined>): ProxySettings | undefined {
  const httpProxy = env.HTTP_PROXY || env.http_proxy || undefined;
  const httpsProxy = env.HTTPS_PROXY || env.https_proxy || undefined;
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy: httpProxy ?? '', httpsProxy: httpsProxy ?? httpProxy, noProxy: env.NO_PROXY || env.no_proxy || '' };
}

interface RawResponse {
  status: number;
  retryAfter?: string;
  text: string;
}

type Init = { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal };

const keepAlive: Record<string, unknown> = {};

async function nodeExchange(url: string, init: Init): Promise<RawResponse> {
  const u = new URL(url);
  const mod = u.protocol === 'https:' ? await import('node:https') : await import('node:http');
  keepAlive[u.protocol] ??= new mod.Agent({ keepAlive: true });
  const headers: Record<string, string | number> = { ...init.headers };
  if (init.body !== undefined) headers['content-length'] = Buffer.byteLength(init.body);
  return new Promise((resolve, reject) => {
    const req = mod.request(u, { method: init.method, headers, agent: keepAlive[u.protocol] as import('node:http').Agent, signal: init.signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const ra = res.headers['retry-after'];
        resolve({ status: res.statusCode ?? 0, retryAfter: Array.isArray(ra) ? ra[0] : ra, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** One HTTP exchange, through node:http(s) or undici (see HttpClientOptions.dispatcher). */
async function exchange(url: string, init: Init, dispatcher: Dispatcher | Promise<Dispatcher> | undefined): Promise<RawResponse> {
  if (dispatcher === undefined) return nodeExchange(url, init);
  const { request } = await import('undici');
  const res = await request(url, { ...init, dispatcher: await dispatcher });
  const ra = res.headers['retry-after'];
  return { status: res.statusCode, retryAfter: Array.isArray(ra) ? ra[0] : ra, text: await res.body.text() };
}

class AttemptTimeout extends Error {}

/** The service's own words from an error body: its message, error or detail field, else the start of the body. */
export function describeErrorBody(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return '';
  try {
    const parsed = JSON.parse(trimmed) as unknown;
    const found = pickMessage(parsed);
    if (found) return oneLine(found);
  } catch {
    // not JSON: fall through to the start of the body
  }
  return oneLine(trimmed.startsWith('<') ? trimmed.replace(/<[^>]*>/g, ' ') : trimmed);
}

function pickMessage(value: unknown, depth = 0): string | undefined {
  if (depth > 3 || value === null || value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const parts = value.map((v) => pickMessage(v, depth + 1)).filter(Boolean);
    return parts.length ? parts.join('; ') : undefined;
  }
  if (typeof value === 'object') {
    const o = value as Record<string, unknown>;
    for (const key of ['message', 'error', 'detail', 'msg', 'error_description', 'title']) {
      const found = pickMessage(o[key], depth + 1);
      if (found) {
        const loc = Array.isArray(o.loc) ? ` (${o.loc.join('.')})` : '';
        return found + loc;
      }
    }
  }
  return undefined;
}

function oneLine(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** `Retry-After` as milliseconds (seconds or an HTTP date), or undefined. */
export function parseRetryAfter(value: string | string[] | undefined, now: number = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The service client's transport: auth, timeouts, retries for GET, errors as typed exceptions. */
export class HttpClient {
  readonly baseUrl: string;
  private readonly options: HttpClientOptions;

  constructor(options: HttpClientOptions) {
    this.options = options;
    this.baseUrl = options.baseUrl;
  }

  private log(text: string): void {
    this.options.log?.(redact(text, this.options.credentials.secrets));
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) u.searchParams.set(k, String(v));
    }
    return u.toString();
  }

  async request<T = unknown>(method: Method, path: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
    const url = this.url(path, options.query);
    const deadline = Date.now() + this.options.timeoutMs;
    const retries = method === 'GET' ? (this.options.maxRetries ?? 3) : 0;
    const headers: Record<string, string> = {
      'user-agent': userAgent(),
      accept: 'application/json',
    };
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }

    let attempt = 0;
    for (;;) {
      attempt++;
      const started = Date.now();
      const remaining = deadline - started;
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(new AttemptTimeout()), Math.max(1, remaining));
      let status: number | undefined;
      let text = '';
      let retryAfterHeader: string | undefined;
      let failure: unknown;
      try {
        // minted for each attempt: a legacy token is never sent stale, however long the command runs
        headers.authorization = await this.options.credentials.authorization();
        const who = this.options.credentials.clientId ? ` for client ${this.options.credentials.clientId}` : '';
        this.log(`→ ${method} ${url}  (attempt ${attempt}, Authorization: ${this.options.credentials.scheme === 'bearer' ? 'Bearer' : 'Basic'} ***${who})`);
        const res = await exchange(url, { method, headers, body, signal: controller.signal }, this.options.dispatcher ?? (this.options.proxy ? proxyDispatcher(this.options.proxy) : undefined));
        status = res.status;
        retryAfterHeader = res.retryAfter;
        text = res.text;
      } catch (err) {
        failure = err;
      } finally {
        clearTimeout(timer);
      }
      const took = Date.now() - started;
      const timedOut = controller.signal.aborted;

      if (failure === undefined && status !== undefined) {
        this.log(`← ${status} ${method} ${url}  (${formatDuration(took)})`);
        if (status >= 200 && status < 300) {
          return { status, data: parseBody(text) as T };
        }
        if (!(RETRYABLE_STATUS.has(status) && attempt <= retries)) {
          throw this.statusError(method, url, status, text, attempt, options);
        }
      } else {
        this.log(`✗ ${method} ${url}  ${timedOut ? 'timed out' : networkReason(failure)}  (${formatDuration(took)})`);
        if (attempt > retries || Date.now() >= deadline) {
          throw this.transportError(method, failure, timedOut, attempt, options);
        }
      }

      const retryAfter = status === undefined ? undefined : parseRetryAfter(retryAfterHeader);
      const backoff = (this.options.retryBaseMs ?? 250) * 2 ** (attempt - 1);
      const delay = Math.min(retryAfter ?? backoff * (0.5 + Math.random()), MAX_RETRY_AFTER_MS);
      if (Date.now() + delay >= deadline) {
        if (status !== undefined) throw this.statusError(method, url, status, text, attempt, options);
        throw this.transportError(method, failure, timedOut, attempt, options);
      }
      this.log(`  retrying in ${formatDuration(delay)}`);
      await sleep(delay);
    }
  }

  private statusError(method: Method, url: string, status: number, text: string, attempts: number, options: RequestOptions): WxError {
    const said = describeErrorBody(text);
    const saying = said ? `: ${said}` : '';
    const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
    const serviceMessage = said || undefined;
    if (status === 401 || status === 403) {
      return new AuthError(`The service refused the credentials (${status})${saying}`, {
        status,
        serviceMessage,
        hint: 'Check WX_API_KEY (and WX_CLIENT_ID with --auth basic), and that --base-url points at the service the key belongs to.',
      });
    }
    if (status === 404) {
      return new NotFoundError(`${options.subject ? `Not found: ${options.subject}` : `Not found: ${method} ${url}`} (404)${saying}`, {
        status,
        serviceMessage,
        hint: options.subject?.startsWith('webhook')
          ? `List what exists with \`wxhooks webhook list\`; if that is not found either, the base URL (${this.baseUrl}) may be wrong.`
          : `The base URL may be wrong: ${this.baseUrl} has no ${new URL(url).pathname}. Check --base-url, WX_BASE_URL or the base-url setting (it names the service, or a \`wxhooks emulator\`; not a \`wxhooks listen\`).`,
      });
    }
    if (status >= 500) {
      return new UnreachableError(`The service answered ${status}${tries}${saying}`, {
        status,
        serviceMessage,
        hint: method === 'GET' ? 'The service is having trouble; try again later.' : (options.writeHint ?? WRITE_HINT),
      });
    }
    return new RefusedError(`The service refused the request (${status})${saying}`, { status, serviceMessage });
  }

  private transportError(method: Method, failure: unknown, timedOut: boolean, attempts: number, options: RequestOptions): WxError {
    const tries = attempts > 1 ? ` (${attempts} attempts)` : '';
    const what = timedOut
      ? `The service at ${this.baseUrl} did not answer within ${formatDuration(this.options.timeoutMs)}${tries}.`
      : `Could not reach the service at ${this.baseUrl}: ${networkReason(failure)}${tries}.`;
    // A connection that was never made cannot have changed anything, write or not.
    const e = failure as { code?: string; cause?: { code?: string } } | undefined;
    const neverSent = !timedOut && NEVER_SENT.has(e?.code ?? e?.cause?.code ?? '');
    const hint =
      method !== 'GET' && !neverSent
        ? (options.writeHint ?? WRITE_HINT)
        : timedOut
          ? 'Try again, or allow more time with --timeout.'
          : 'Check --base-url or WX_BASE_URL. To work offline, start a local copy of the service with `wxhooks emulator`.';
    return new UnreachableError(what, { hint, cause: failure });
  }
}

const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

const WRITE_HINT = "The change may have been applied anyway, and writes are never retried: check the webhook's state with `wxhooks webhook list` or `wxhooks webhook get ID` before trying again.";

function parseBody(text: string): unknown {
  if (!text.trim()) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
