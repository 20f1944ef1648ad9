/**
 * `npm start` for a developer on one machine: migrate, then web and workers in one process
 * sharing one set of connections. On first start with no application it creates a demo one.
 */
import { createApplication, countApplications } from './apps/applications.js';
import { SCOPES } from './auth/scopes.js';
import { loadConfig } from './config.js';
import { closeDeps, createDeps } from './deps.js';
import { migrate } from './migrate.js';
import { survivingUnhandledRejections } from './last-resort.js';
import { onShutdownSignal } from './shutdown.js';
import { startWeb } from './web.js';
import { startTracing } from './tracing/index.js';
import { checkRedis } from './startup-checks.js';
import { startWorkers } from '../workers/index.js';

const config = loadConfig();
await migrate(config.DATABASE_URL);
const tracing = await startTracing(config, { role: 'all' });
const deps = createDeps(config, { tracing });
survivingUnhandledRejections(deps.logger, deps.metrics);
await checkRedis(deps.redis, deps.logger, { shardedPubsub: deps.config.REDIS_SHARDED_PUBSUB });
if (config.usingDevSecrets) {
  deps.logger.warn('ADMIN_TOKEN or SECRETS_KEY not set: using development defaults (never in production)');
}
const workers = startWorkers(deps);
const web = await startWeb(deps);

if (config.DEMO_APP && (await countApplications(deps.sql)) === 0) {
  const demo = await createApplication(deps.sql, 'demo', [...SCOPES]);
  const base = `http://localhost:${web.port}`;
  process.stdout.write(
    `${[
      '',
      'Demo application created (shown once):',
      `  app id:  ${demo.appId}`,
      `  API key: ${demo.apiKey}`,
      '',
      'Try it:',
      `  curl -s ${base}/v1/events -H 'Authorization: Bearer ${demo.apiKey}' -H 'X-Service-App-ID: ${demo.appId}'`,
      '',
      "For README's quick start, paste this into another terminal:",
      `  export GATEWAY=${base} APP_ID=${demo.appId} API_KEY=${demo.apiKey}`,
      '',
    ].join('\n')}\n`,
  );
}

onShutdownSignal(deps.logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
  await web.close();
  await workers.close();
  await closeDeps(deps);
});
