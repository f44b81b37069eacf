import { BUDGET, TOKEN, relaySuite } from '../helpers/relay-suite.js';
import { nodePostgresRelay } from '../helpers/relay.js';
import { sharedPostgres } from '../helpers/services.js';

// The relay's Node host (`wxhooks relay serve`), in this process, over PostgreSQL: a database of this
// file's own on the run's server (over a folder: test/relay-node.test.ts). The same suite runs against
// the Worker (test/relay-worker.test.ts).
relaySuite('the Node host, PostgreSQL store', async () => nodePostgresRelay({ token: TOKEN, maxBytes: BUDGET }, await sharedPostgres()));
