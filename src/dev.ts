/**
 * `npm start` for a developer on one machine: migrate, then web and workers in one process
 * sharing one set of connections. On first start with no application it creates a demo one;
 * later starts say how to get a key, since the demo's was shown only once.
 */
import { createApplication, listApplications } from './apps/applications.js';
import { SCOPES } from './auth/scopes.js';
import { loadConfig } from './config.js';
import { closeDeps, createDeps } from './deps.js';
import { migrate } from './migrate.js';
import { survivingUnhandledRejections } from './last-resort.js';
import { onShutdownSignal, stopWhenOrphaned } from './shutdown.js';
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

const apps = await listApplications(deps.sql);
if (config.DEMO_APP && apps.length === 0) {
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
} else {
  // Keys are shown once, when created: a restart names the command that makes another.
  const hint = apps.length
    ? [
        `API keys are shown only when created. A new key for ${apps[0].name} (npm run cli -- app list lists every application):`,
        `  npm run cli -- key create --app ${apps[0].id}`,
      ]
    : ['No application yet. Create one (its API key is shown once):', '  npm run cli -- app create --name NAME'];
  process.stdout.write(`\n${hint.join('\n')}\n\n`);
}

const shutdown = onShutdownSignal(deps.logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
  await web.close();
  await workers.close();
  await closeDeps(deps);
});
stopWhenOrphaned(shutdown);
