// Hono, on Bun (bun run examples/hono.js) or Deno (deno serve --allow-env --allow-net examples/hono.js)
import { Hono } from 'hono';
import { Webhooks, createWebHandler } from 'wxhooks/web';

const webhooks = new Webhooks({
  secrets: [process.env.WX_WEBHOOK_SECRET, process.env.WX_WEBHOOK_SECRET_OLD].filter((s) => s !== undefined),
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
});
webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));

const handle = createWebHandler(webhooks);
const app = new Hono();
app.post('/webhooks', (c) => handle(c.req.raw));
app.get('/health', (c) => c.text('ok'));
export default app;
