// Express 5 (Node): node examples/express.js
import express from 'express';
import { Webhooks, createNodeMiddleware } from 'wxhooks';

const webhooks = new Webhooks({
  // during a rotation, both: a delivery signed with either is accepted
  secrets: [process.env.WX_WEBHOOK_SECRET, process.env.WX_WEBHOOK_SECRET_OLD].filter((s) => s !== undefined),
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
});
webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));

const app = express();
app.use(createNodeMiddleware(webhooks, { path: '/webhooks' })); // before any JSON body parser
app.get('/health', (_req, res) => res.send('ok'));
app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
