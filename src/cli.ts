/**
 * Operator CLI (`npm run cli -- …`). Each command prints JSON lines on stdout, so scripts can
 * read them; `--help` (any level) describes the commands. A failure is one line on stderr and
 * a non-zero exit: 2 for a mistake in the command, 1 when it could not be carried out (the
 * database unreachable, a refusal); `--verbose` adds the stack.
 */
import { parseArgs } from 'node:util';
import { createApplication, listApplications, applicationExists } from './apps/applications.js';
import { createApiKey, isUuid, revokeApiKey } from './auth/api-keys.js';
import { OPERATOR, parseScopeList, SCOPES, type Scope } from './auth/scopes.js';
import { eventScopeSchema } from './ledger/event-scope.js';
import { portalAreaSchema } from './portal/areas.js';
import { createSignIn, revokeAllSessions, signInUrl } from './portal/sessions.js';
import { loadConfig, type Config } from './config.js';
import { createSql, type Sql } from './db.js';
import { targetingPrimary } from './db-primary.js';
import { discardDeadLetter, listDeadLetters, requeueAllDeadLetters, requeueDeadLetter } from './dead-letters.js';
import { isUnavailable } from './errors.js';
import { closeQueues, createQueues, QUEUE_NAMES, type QueueName, type Queues } from './queues.js';
import { createLogger } from './logger.js';
import { createRedis } from './redis.js';

const OPTIONS = {
  name: { type: 'string' },
  scopes: { type: 'string' },
  app: { type: 'string' },
  queue: { type: 'string' },
  limit: { type: 'string' },
  all: { type: 'boolean' },
  areas: { type: 'string' },
  channels: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  verbose: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** A mistake in how the command was written: exit 2, and the message says what to change. */
class UsageError extends Error {}

interface Run {
  values: Values;
  /** The positional after the command's two words (a key or job id). */
  arg: string | undefined;
  config: () => Config;
  sql: () => Sql;
  print: (obj: unknown) => void;
  scopes: () => Scope[];
}

interface Command {
  usage: string;
  summary: string;
  run(r: Run): Promise<void>;
}

/** An existing application's id from --app, or a UsageError naming the command. */
async function existingApp(r: Run, command: string): Promise<string> {
  const app = r.values.app;
  if (!app || !isUuid(app) || !(await applicationExists(r.sql(), app)))
    throw new UsageError(`${command} needs --app with an existing application id`);
  return app;
}

/** The dead-letter commands need Redis (the queues), not the database. */
async function withQueues<T>(r: Run, use: (queues: Queues, queue: QueueName | undefined, limit: number) => Promise<T>): Promise<T> {
  const queue = r.values.queue as QueueName | undefined;
  if (queue !== undefined && !QUEUE_NAMES.includes(queue)) throw new UsageError(`--queue must be one of ${QUEUE_NAMES.join(', ')}`);
  const limit = r.values.limit === undefined ? 100 : Number(r.values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be an integer from 1 to 10000');
  const config = r.config();
  const redis = createRedis(config.redis);
  // Its output is JSON lines on stdout, and a failed command says why: queue events stay out of it.
  const queues = createQueues(redis, config, createLogger('silent'));
  try {
    return await use(queues, queue, limit);
  } finally {
    await closeQueues(queues);
    await redis.quit().catch(() => redis.disconnect());
  }
}

/** `dead requeue|discard --queue Q JOB_ID`: one job, by id. */
async function oneDeadLetter(
  r: Run,
  name: string,
  queues: Queues,
  queue: QueueName | undefined,
  act: (queues: Queues, queue: QueueName, id: string) => Promise<string>,
): Promise<void> {
  if (!queue || !r.arg || r.values.all) throw new UsageError(`usage: npm run cli -- ${COMMANDS[name].usage}`);
  const result = await act(queues, queue, r.arg);
  if (result === 'not_found') throw new UsageError(`no dead-lettered job ${r.arg} in queue ${queue}`);
  r.print({ queue, id: r.arg, result });
}

const COMMANDS: Record<string, Command> = {
  'app create': {
    usage: 'app create --name NAME [--scopes a,b]',
    summary:
      'Creates an application and its first API key (all scopes by default); prints {"app_id","api_key","key_id","scopes"}. The key is shown only now.',
    async run(r) {
      const name = r.values.name?.trim();
      if (!name) throw new UsageError('app create needs --name NAME');
      const scopes = r.scopes();
      const app = await createApplication(r.sql(), name, scopes);
      r.print({ app_id: app.appId, api_key: app.apiKey, key_id: app.keyId, scopes });
    },
  },
  'app list': {
    usage: 'app list',
    summary: 'Prints one line per application: {"app_id","name","created_at","active_keys"}.',
    async run(r) {
      for (const a of await listApplications(r.sql()))
        r.print({ app_id: a.id, name: a.name, created_at: a.created_at, active_keys: a.active_keys });
    },
  },
  'key create': {
    usage: 'key create --app APP_ID [--scopes a,b]',
    summary: 'Adds an API key to an application (all scopes by default); prints {"key_id","api_key","scopes"}. The key is shown only now.',
    async run(r) {
      const scopes = r.scopes();
      const made = await createApiKey(r.sql(), OPERATOR, await existingApp(r, 'key create'), scopes);
      if (!made.ok) throw new Error(made.error.message);
      r.print({ key_id: made.value.keyId, api_key: made.value.apiKey, scopes });
    },
  },
  'key revoke': {
    usage: 'key revoke KEY_ID',
    summary: 'Revokes a key at once, in every process; prints {"key_id","revoked":true}.',
    async run(r) {
      if (!r.arg) throw new UsageError('key revoke needs KEY_ID');
      if (!(await revokeApiKey(r.sql(), r.arg))) throw new UsageError(`no active key ${r.arg}`);
      r.print({ key_id: r.arg, revoked: true });
    },
  },
  'dead list': {
    usage: `dead list [--queue ${QUEUE_NAMES.join('|')}] [--limit N]`,
    summary: 'Prints one line per dead-lettered (failed) job, newest first, at most N per queue (default 100).',
    run: (r) =>
      withQueues(r, async (queues, queue, limit) => {
        for (const name of queue ? [queue] : QUEUE_NAMES) for (const d of await listDeadLetters(queues, name, limit)) r.print(d);
      }),
  },
  'dead requeue': {
    usage: 'dead requeue --queue Q JOB_ID | dead requeue --queue Q --all [--limit N]',
    summary:
      'Puts a dead-lettered job (or the newest N, default 100) back on its queue with its attempts reset; prints {"queue","id","result"} or {"queue","requeued":N}.',
    run: (r) =>
      withQueues(r, async (queues, queue, limit) => {
        if (queue && r.values.all && !r.arg) return r.print({ queue, requeued: await requeueAllDeadLetters(queues, queue, limit) });
        await oneDeadLetter(r, 'dead requeue', queues, queue, requeueDeadLetter);
      }),
  },
  'dead discard': {
    usage: 'dead discard --queue Q JOB_ID',
    summary: 'Deletes a dead-lettered job for good; prints {"queue","id","result":"discarded"}.',
    run: (r) => withQueues(r, (queues, queue) => oneDeadLetter(r, 'dead discard', queues, queue, discardDeadLetter)),
  },
  'portal open': {
    usage: 'portal open --app APP_ID [--areas all|webhooks|events] [--scopes a,b] [--channels a,b]',
    summary:
      'Prints {"url","scopes","expires_at"}: a one-time developer-portal sign-in URL, valid 10 minutes (--channels confines it to those channels, for one of your customers).',
    async run(r) {
      const appId = await existingApp(r, 'portal open');
      const areas = (r.values.areas ?? 'all').split(',').map((a) => portalAreaSchema.safeParse(a.trim()));
      const valid = areas.flatMap((a) => (a.success ? [a.data] : []));
      if (valid.length !== areas.length) throw new UsageError('--areas must be all, or webhooks and/or events, comma-separated');
      const scope = r.values.channels === undefined ? undefined : eventScopeSchema.safeParse({ channels: r.values.channels.split(',') });
      if (scope && !scope.success) throw new UsageError(`--channels: ${scope.error.issues[0]?.message}`);
      // The operator's link is tied to no key: it ends by expiry or `portal revoke`.
      const made = await createSignIn(r.sql(), OPERATOR, {
        appId,
        areas: valid,
        scopes: r.scopes(),
        eventScope: scope?.data,
        expiresInSeconds: 600,
      });
      if (!made.ok) throw new Error(made.error.message);
      const link = made.value;
      r.print({ url: signInUrl(r.config().PUBLIC_BASE_URL, link.token), scopes: link.scopes, expires_at: link.expiresAt.toISOString() });
    },
  },
  'portal revoke': {
    usage: 'portal revoke --app APP_ID',
    summary: 'Ends the application\'s portal sessions and unused sign-in links; prints {"app_id","revoked":N}.',
    async run(r) {
      const appId = await existingApp(r, 'portal revoke');
      r.print({ app_id: appId, revoked: await revokeAllSessions(r.sql(), appId) });
    },
  },
};

/** The help for every command whose name starts with `prefix` ('' for all). */
function help(prefix: string): string {
  const shown = Object.entries(COMMANDS).filter(([name]) => name === prefix || name.startsWith(`${prefix} `) || prefix === '');
  const lines = shown.flatMap(([, c]) => [`  npm run cli -- ${c.usage}`, `      ${c.summary}`]);
  return [
    'usage:',
    ...lines,
    '',
    `Scopes: ${SCOPES.join(', ')}. Options: --help (-h) on any command; --verbose adds the stack to a failure.`,
  ].join('\n');
}

/** One line saying what went wrong: which service could not be reached, or what the database refused. */
function describe(err: unknown): string {
  const e = err as { message?: string; code?: string; severity?: string; name?: string };
  const message = e?.message ?? String(err);
  if (isUnavailable(err))
    return `${/redis|cluster|max retries/i.test(`${e.name} ${message}`) ? 'cannot reach Redis' : 'cannot reach PostgreSQL'} (${message})`;
  if (e?.severity) return `database error: ${message}${e.code ? ` (SQLSTATE ${e.code})` : ''}`;
  return message;
}

async function main(argv: string[]): Promise<number> {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    // node's message goes on to explain `--`; its first sentence is the point.
    throw new UsageError(`${(err as Error).message.split('. ')[0]} (npm run cli -- --help lists the commands)`);
  }
  const { values, positionals } = parsed;
  const [noun, verb, arg] = positionals;
  const words = [noun, verb].filter(Boolean).join(' ');
  if (noun === 'help' || (values.help && (!noun || Object.keys(COMMANDS).some((name) => name === words || name.startsWith(`${words} `))))) {
    process.stdout.write(`${help(noun === 'help' ? '' : words)}\n`);
    return 0;
  }
  const command = COMMANDS[words];
  if (!command) throw new UsageError(`${noun ? `unknown command "${words}"` : 'no command given'}; usage: npm run cli -- --help`);
  let config: Config | undefined;
  let sql: Sql | undefined;
  const run: Run = {
    values,
    arg,
    config: () => (config ??= loadConfig()),
    sql: () => (sql ??= createSql(targetingPrimary(run.config().DATABASE_URL), { max: 1 })),
    print: (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`),
    scopes: () => {
      try {
        return parseScopeList(values.scopes);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    },
  };
  try {
    await command.run(run);
  } finally {
    await sql?.end({ timeout: 5 });
  }
  return 0;
}

const argv = process.argv.slice(2);
let code: number;
try {
  code = await main(argv);
} catch (err) {
  process.stderr.write(`cli: ${describe(err)}\n`);
  if (argv.includes('--verbose')) process.stderr.write(`${(err as Error)?.stack ?? err}\n`);
  code = err instanceof UsageError ? 2 : 1;
}
// Exits at once: a client still retrying a server that is down must not hold the process open.
process.exit(code);
