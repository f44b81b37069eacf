import type { ServerResponse } from 'node:http';
import { emulatorCredentials } from '../../src/emulator/auth.js';
import { DeliveryScheduler } from '../../src/emulator/deliveries.js';
import { EmulatorRouter, type Shape } from '../../src/emulator/routes.js';
import { EmulatorState } from '../../src/emulator/state.js';
import { startServer, type Recorded, type TestServer } from './server.js';

export const API_KEY = 'test_api_key_0123456789';

export interface FakeService extends TestServer {
  state: EmulatorState;
  /** Runs before the emulator answers; return true to have answered yourself. */
  before?: (req: Recorded, res: ServerResponse) => boolean | Promise<boolean>;
  env: Record<string, string>;
  /** The requests that reached the API (not the emulator's own routes). */
  api(): Recorded[];
  stop(): Promise<void>;
}

/**
 * A real HTTP server on 127.0.0.1 that records every request and answers with
 * the emulator's routes, in the documented or the live service's shapes.
 */
export async function startService(shape: Shape, configDir: string): Promise<FakeService> {
  const state = new EmulatorState();
  const scheduler = new DeliveryScheduler(state, { retryDelays: [], shape });
  const router = new EmulatorRouter(state, scheduler, { credentials: emulatorCredentials(API_KEY, 'client_test'), shape });
  const holder: { svc?: FakeService } = {};
  const server = await startServer(async (req, res) => {
    if (holder.svc?.before && (await holder.svc.before(req, res))) return;
    const u = new URL(req.url, 'http://x');
    const r = await router.handle({ method: req.method, path: u.pathname, query: u.searchParams, headers: req.headers, body: req.json });
    const headers: Record<string, string> = { ...r.headers };
    if (r.body !== undefined) headers['content-type'] = 'application/json';
    res.writeHead(r.status, headers).end(r.body === undefined ? undefined : JSON.stringify(r.body));
  });
  const svc: FakeService = Object.assign(server, {
    state,
    env: { WX_BASE_URL: server.url, WX_API_KEY: API_KEY, WXHOOKS_CONFIG_DIR: configDir },
    api: () => server.requests.filter((r) => !r.path.startsWith('/emulator/')),
    stop: async () => {
      await scheduler.close();
      await server.close();
    },
  });
  holder.svc = svc;
  return svc;
}
