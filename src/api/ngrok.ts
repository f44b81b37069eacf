import { UsageError } from '../errors.js';
import { networkReason, readStart } from '../util/net.js';

/** Where the local ngrok agent answers its API, unless NGROK_API_URL says otherwise. */
export const NGROK_API = 'http://127.0.0.1:4040';

interface Tunnel {
  public_url?: unknown;
  proto?: unknown;
  config?: { addr?: unknown };
}

/** The port a tunnel's `config.addr` forwards to: `http://localhost:8787`, `localhost:8787` or `8787`. */
export function tunnelPort(addr: unknown): number | undefined {
  if (typeof addr !== 'string' && typeof addr !== 'number') return undefined;
  const m = /(?:^|:)(\d+)\/?$/.exec(String(addr).trim());
  return m ? Number(m[1]) : undefined;
}

/**
 * The public https address of the ngrok tunnel that forwards to `port`, from the local agent's API
 * (`GET /api/tunnels`). A usage error (exit 2) that says `ngrok http <port>` if there is none.
 */
export async function ngrokPublicUrl(apiUrl: string, port: number, timeoutMs = 5000): Promise<string> {
  const start = `Start one with \`ngrok http ${port}\` (in another terminal), then run this again.`;
  const { request } = await import('undici');
  let tunnels: Tunnel[];
  try {
    const res = await request(`${apiUrl.replace(/\/+$/, '')}/api/tunnels`, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await readStart(res.body, 1024 * 1024);
    if (res.statusCode !== 200) throw new Error(`it answered ${res.statusCode}`);
    const parsed = JSON.parse(text) as { tunnels?: unknown };
    tunnels = Array.isArray(parsed.tunnels) ? (parsed.tunnels as Tunnel[]) : [];
  } catch (err) {
    throw new UsageError(`The ngrok agent's API at ${apiUrl} cannot be read (${networkReason(err, timeoutMs)}): is ngrok running?`, { hint: `${start} Set NGROK_API_URL if its API is elsewhere.` });
  }
  const match = tunnels.find((t) => t.proto === 'https' && typeof t.public_url === 'string' && tunnelPort(t.config?.addr) === port);
  if (!match) {
    const others = tunnels.map((t) => `${String(t.public_url)} → ${String(t.config?.addr)}`).join(', ');
    throw new UsageError(`No ngrok https tunnel forwards to port ${port}${others ? ` (there are: ${others})` : ''}.`, { hint: start });
  }
  return match.public_url as string;
}
