import { BUDGET, TOKEN, relaySuite } from './helpers/relay-suite.js';
import { workerdRelay } from './helpers/relay.js';

// The relay as a Cloudflare Worker: the bundle wrangler deploys (dist/relay-worker/index.js) in workerd,
// its Durable Object's SQLite on disk. The same suite runs against the Node host (relay-node.test.ts).
relaySuite('the Worker (workerd)', () => workerdRelay({ token: TOKEN, maxBytes: BUDGET }));
