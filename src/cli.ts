/**
 * Operator CLI. Each command prints one JSON line, so scripts can read it.
 *   app create --name NAME [--scopes a,b]   → {"app_id","api_key"}
 *   app list                                → one JSON line per application
 *   key create --app APP_ID [--scopes a,b]  → {"key_id","api_key"}
 *   key revoke KEY_ID                       → {"key_id","revoked":true}
 *   dead list [--queue Q] [--limit N]       → one JSON line per dead-lettered (failed) job
 *   dead requeue --queue Q JOB_ID           → {"queue","id","result":"requeued"}
 *   dead requeue --queue Q --all [--limit N] → {"queue","requeued":N}
 *   dead discard --queue Q JOB_ID           → {"queue","id","result":"discarded"}
 *   portal open --app APP_ID [--areas all|webhooks|events] [--scopes a,b] [--channels a,b] → {"url","scopes","expires_at"} (a one-time sign-in URL; --channels confines it to them)
 *   portal revoke --app APP_ID              → {"app_id","revoked":N} (ends its portal sessions)
 */
import { parseArgs } from 'node:util';
import { createApplication, listApplications, applicationExists } from './apps/applications.js';
import { createApiKey, isUuid, revokeApiKey } from './auth/api-keys.js';
import { OPERATOR, parseScopeList } from './auth/scopes.js';
import { eventScopeSchema } from './ledger/event-scope.js';
import { portalAreaSchema } from './portal/areas.js';
import { createSignIn, revokeAllSessions, signInUrl } from './portal/sessions.js';
import { loadConfig } from './config.js';
import { createSql } from './db.js';
import { targetingPrimary } from './db-primary.js';
import { discardDeadLetter, listDeadLetters, requeueAllDeadLetters, requeueDeadLetter } from './dead-letters.js';
import { closeQueues, createQueues, QUEUE_NAMES, type QueueName, type Queues } from './queues.js';
import { createLogger } from './logger.js';
import { createRedis } from './redis.js';

const USAGE = `usage:
  cli app create --name NAME [--scopes a,b]
  cli app list
  cli key create --app APP_ID [--scopes a,b]
  cli key revoke KEY_ID
  cli dead list [--queue ${QUEUE_NAMES.join('|')}] [--limit N]
  cli dead requeue --queue Q JOB_ID
  cli dead requeue --queue Q --all [--limit N]
  cli dead discard --queue Q JOB_ID
  cli portal open --app APP_ID [--areas all|webhooks|events] [--scopes a,b] [--channels a,b]
  cli portal revoke --app APP_ID`;

function die(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: {
    name: { type: 'string' },
    scopes: { type: 'string' },
    app: { type: 'string' },
    queue: { type: 'string' },
    limit: { type: 'string' },
    all: { type: 'boolean' },
    areas: { type: 'string' },
    channels: { type: 'string' },
  },
  allowPositionals: true,
  strict: true,
});
const [noun, verb, arg] = positionals;
const config = loadConfig();
const sql = createSql(targetingPrimary(config.DATABASE_URL), { max: 1 });
const print = (obj: unknown) => process.stdout.write(`${JSON.stringify(obj)}\n`);

/** The dead-letter commands: they need Redis (the queues), not the database. */
async function deadLetters(verb: string | undefined, id: string | undefined): Promise<void> {
  const queue = values.queue as QueueName | undefined;
  if (queue !== undefined && !QUEUE_NAMES.includes(queue)) die(`--queue must be one of ${QUEUE_NAMES.join(', ')}`);
  const limit = values.limit === undefined ? 100 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) die('--limit must be an integer from 1 to 10000');
  const redis = createRedis(config.redis);
  // Its output is JSON lines on stdout, and a failed command says why: queue events stay out of it.
  const queues: Queues = createQueues(redis, config, createLogger('silent'));
  try {
    if (verb === 'list') {
      for (const name of queue ? [queue] : QUEUE_NAMES) for (const d of await listDeadLetters(queues, name, limit)) print(d);
    } else if (verb === 'requeue' && queue && values.all && !id) {
      print({ queue, requeued: await requeueAllDeadLetters(queues, queue, limit) });
    } else if ((verb === 'requeue' || verb === 'discard') && queue && id && !values.all) {
      const result = await (verb === 'requeue' ? requeueDeadLetter : discardDeadLetter)(queues, queue, id);
      if (result === 'not_found') die(`no dead-lettered job ${id} in queue ${queue}`);
      print({ queue, id, result });
    } else {
      die(USAGE);
    }
  } finally {
    await closeQueues(queues);
    await redis.quit().catch(() => redis.disconnect());
  }
}

try {
  const scopes = (() => {
    try {
      return parseScopeList(values.scopes);
    } catch (err) {
      return die((err as Error).message);
    }
  })();
  if (noun === 'app' && verb === 'create') {
    if (!values.name?.trim()) die('app create needs --name NAME');
    const app = await createApplication(sql, values.name.trim(), scopes);
    print({ app_id: app.appId, api_key: app.apiKey, key_id: app.keyId, scopes });
  } else if (noun === 'app' && verb === 'list') {
    for (const a of await listApplications(sql))
      print({ app_id: a.id, name: a.name, created_at: a.created_at, active_keys: a.active_keys });
  } else if (noun === 'key' && verb === 'create') {
    if (!values.app || !isUuid(values.app) || !(await applicationExists(sql, values.app)))
      die(`key create needs --app with an existing application id`);
    const made = await createApiKey(sql, OPERATOR, values.app, scopes);
    if (!made.ok) die(made.error.message);
    const key = made.value;
    print({ key_id: key.keyId, api_key: key.apiKey, scopes });
  } else if (noun === 'portal' && (verb === 'open' || verb === 'revoke')) {
    if (!values.app || !isUuid(values.app) || !(await applicationExists(sql, values.app)))
      die(`portal ${verb} needs --app with an existing application id`);
    if (verb === 'revoke') {
      print({ app_id: values.app, revoked: await revokeAllSessions(sql, values.app) });
    } else {
      const areas = (values.areas ?? 'all').split(',').map((a) => portalAreaSchema.safeParse(a.trim()));
      const valid = areas.flatMap((a) => (a.success ? [a.data] : []));
      if (valid.length !== areas.length) die('--areas must be all, or webhooks and/or events, comma-separated');
      const scope = values.channels === undefined ? undefined : eventScopeSchema.safeParse({ channels: values.channels.split(',') });
      if (scope && !scope.success) die(`--channels: ${scope.error.issues[0]?.message}`);
      // The operator's link is tied to no key: it ends by expiry or `portal revoke`.
      const made = await createSignIn(sql, OPERATOR, {
        appId: values.app,
        areas: valid,
        scopes,
        eventScope: scope?.data,
        expiresInSeconds: 600,
      });
      if (!made.ok) die(made.error.message);
      const link = made.value;
      print({ url: signInUrl(config.PUBLIC_BASE_URL, link.token), scopes: link.scopes, expires_at: link.expiresAt.toISOString() });
    }
  } else if (noun === 'dead') {
    await deadLetters(verb, arg);
  } else if (noun === 'key' && verb === 'revoke') {
    if (!arg) die('key revoke needs KEY_ID');
    if (!(await revokeApiKey(sql, arg))) die(`no active key ${arg}`);
    print({ key_id: arg, revoked: true });
  } else {
    die(USAGE);
  }
} finally {
  await sql.end({ timeout: 5 });
}
