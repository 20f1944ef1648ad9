/**
 * The HTTP ceiling for benchmarks: a bare express app that parses the JSON body and answers
 * ECHO_STATUS (201) with a small JSON object — everything the gateway's web process does
 * except auth, rate limit, validation, enqueue and waiting for the commit.
 */
import { randomUUID } from 'node:crypto';
import express from 'express';

const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
const status = Number(process.env.ECHO_STATUS ?? 201);
const app = express();
app.use(express.json({ limit: '1mb' }));
app.all('/{*any}', (req, res) => {
  res.status(status).json({ id: randomUUID(), received: Object.keys(req.body ?? {}).length });
});
const server = app.listen(port, '127.0.0.1', () => process.stdout.write(`echo listening on ${port}\n`));
server.keepAliveTimeout = 65_000;
process.on('SIGTERM', () => server.close(() => process.exit(0)));
