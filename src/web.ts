import { checkRedis } from './startup-checks.js';
import { createServer, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { pathToFileURL } from 'node:url';
import { loadConfig } from './config.js';
import { closeDeps, createDeps, runAll, type Deps } from './deps.js';
import { survivingUnhandledRejections } from './last-resort.js';
import { createApp } from './http/app.js';
import type { WebServices } from './http/web-services.js';
import { onShutdownSignal } from './shutdown.js';
import { startTracing } from './tracing/index.js';

export interface WebServer {
  server: Server;
  port: number;
  /** The services the web process built once (caches, stamps, stream machinery). */
  services: WebServices;
  /** Stops accepting, ends open streams, waits for in-flight requests (bounded). */
  close(): Promise<void>;
}

/**
 * The HTTP server's own timeouts, from config (README). Node checks headersTimeout and
 * requestTimeout on a timer (every 30 s by default), so a slow client would be cut up to that
 * much late: the check runs a few times per headers timeout instead.
 */
function serverTimeouts(config: Deps['config']): ServerOptions {
  return {
    headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(config.HTTP_HEADERS_TIMEOUT_MS / 4))),
  };
}

export async function startWeb(deps: Deps, port = deps.config.PORT): Promise<WebServer> {
  const web = createApp(deps);
  const server = createServer(serverTimeouts(deps.config), web.app);
  server.listen(port);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  // Responses still being written when shutdown starts close their connection once sent:
  // otherwise a kept-alive client would hold the server open until the shutdown deadline.
  const inFlight = new Set<ServerResponse>();
  let closing = false;
  server.on('request', (_req, res: ServerResponse) => {
    if (closing) res.shouldKeepAlive = false;
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });
  const actual = (server.address() as { port: number }).port;
  deps.logger.info({ port: actual }, 'web listening');
  return {
    server,
    port: actual,
    services: web.web,
    async close() {
      closing = true;
      for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await runAll(
        deps.logger,
        web.onShutdown.map((hook) => async () => hook()),
      );
      const timer = setTimeout(() => server.closeAllConnections(), deps.config.SHUTDOWN_TIMEOUT_MS);
      await closed;
      clearTimeout(timer);
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const tracing = await startTracing(config, { role: 'web' });
  const deps = createDeps(config, { role: 'web', tracing });
  survivingUnhandledRejections(deps.logger, deps.metrics);
  await checkRedis(deps.redis, deps.logger, { shardedPubsub: deps.config.REDIS_SHARDED_PUBSUB });
  const web = await startWeb(deps);
  onShutdownSignal(deps.logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await web.close();
    await closeDeps(deps);
  });
}
