import { BUDGET, TOKEN, relaySuite } from './helpers/relay-suite.js';
import { nodeFileRelay } from './helpers/relay.js';

// The relay's Node host (`wxhooks relay serve`), in this process, over a folder (over PostgreSQL:
// test/full/relay-node.test.ts). The same suite runs against the Worker (relay-worker.test.ts).
relaySuite('the Node host, file store', () => nodeFileRelay({ token: TOKEN, maxBytes: BUDGET }));
relaySuite('the Node host, file store, no copy in memory', () => nodeFileRelay({ token: TOKEN, maxBytes: BUDGET }, 0));
