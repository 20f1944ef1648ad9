import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createApplication } from '../../src/apps/applications.js';
import { createApiKey } from '../../src/auth/api-keys.js';
import { OPERATOR, SCOPES, type Scope } from '../../src/auth/scopes.js';
import { parseConfig, type Config, type QueueName } from '../../src/config.js';
import { redisReady } from '../../src/availability.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { projectRoot } from '../../src/project-root.js';
import { startWeb, type WebServer } from '../../src/web.js';
import type { Tracing } from '../../src/tracing/index.js';
import { startWorkers } from '../../workers/index.js';
import type { WorkerHost } from '../../workers/host.js';
import { createTestDatabase } from './db.js';
import { SHARED_REDIS_URL } from './servers.js';
import { offCatalogEvents } from './event-audit.js';
import { apiFetch, contractOf, forgetContract } from './openapi-contract.js';

export interface TestEnv {
  /** Environment variables for this test file: its own database and Redis key prefix. */
  env: Record<string, string>;
  config: Config;
  dropDatabase(): Promise<void>;
}

/** A database cloned from the template, a unique Redis prefix and the env naming them. */
export async function createTestEnv(overrides: Record<string, string> = {}): Promise<TestEnv> {
  const db = await createTestDatabase();
  const env: Record<string, string> = {
    NODE_ENV: 'test',
    DATABASE_URL: db.url,
    REDIS_URL: SHARED_REDIS_URL,
    REDIS_PREFIX: `t${randomBytes(5).toString('hex')}`,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ADMIN_TOKEN: 'test-admin-token-0123456789',
    SECRETS_KEY: 'test-secrets-key-0123456789abcdef0123456789',
    WEBHOOK_TARGET_POLICY: 'any',
    ...overrides,
  };
  return { env, config: parseConfig(env), dropDatabase: db.drop };
}

export interface AppCredentials {
  appId: string;
  apiKey: string;
  keyId: string;
  headers: Record<string, string>;
}

export interface TestStack {
  env: Record<string, string>;
  config: Config;
  deps: Deps;
  web: WebServer;
  workers?: WorkerHost;
  base: string;
  /** Creates an application and a key with the given scopes (all by default). */
  createApp(scopes?: Scope[]): Promise<AppCredentials>;
  /** Adds a key to an existing application. */
  createKey(appId: string, scopes: Scope[]): Promise<AppCredentials>;
  /**
   * JSON request helper; `auth` supplies Authorization and X-Service-App-ID. Every answer is
   * checked against the service's OpenAPI document (test/helpers/openapi-contract.ts).
   */
  request(
    method: string,
    path: string,
    options?: { auth?: AppCredentials; body?: unknown; headers?: Record<string, string> },
  ): Promise<TestResponse>;
  gql(auth: AppCredentials, query: string, variables?: Record<string, unknown>): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/**
 * The service in this process: real Postgres (own database), real Redis (own prefix), web on
 * port 0 and, unless `workers: false`, the queue workers.
 */
export async function startTestStack(
  options: { env?: Record<string, string>; workers?: boolean | QueueName[]; tracing?: Tracing } = {},
): Promise<TestStack> {
  const t = await createTestEnv(options.env);
  // `tracing` is shut down with the stack (closeDeps), as a process's would be.
  const deps = createDeps(t.config, { logger: createLogger(t.config.LOG_LEVEL), tracing: options.tracing });
  // As src/web.ts does through its start-up check: the fail-fast request connection is up first.
  await redisReady(deps.redis, 5_000);
  const workers =
    options.workers === false ? undefined : startWorkers(deps, Array.isArray(options.workers) ? options.workers : t.config.WORKER_QUEUES);
  const web = await startWeb(deps, 0);
  const base = `http://127.0.0.1:${web.port}`;
  await contractOf(base);
  const creds = (appId: string, k: { keyId: string; apiKey: string }): AppCredentials => ({
    appId,
    apiKey: k.apiKey,
    keyId: k.keyId,
    headers: { Authorization: `Bearer ${k.apiKey}`, 'X-Service-App-ID': appId },
  });
  const request: TestStack['request'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = {
      ...(o.auth?.headers ?? {}),
      ...(o.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      ...(o.headers ?? {}),
    };
    const r = await apiFetch(base + path, {
      method,
      headers,
      body: o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body),
    });
    const text = await r.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: r.status, headers: r.headers, text, json };
  };
  return {
    env: t.env,
    config: t.config,
    deps,
    web,
    workers,
    base,
    async createApp(scopes = [...SCOPES]) {
      const a = await createApplication(deps.sql, `test-${randomBytes(3).toString('hex')}`, scopes);
      return creds(a.appId, a);
    },
    async createKey(appId, scopes) {
      const made = await createApiKey(deps.sql, OPERATOR, appId, scopes);
      if (!made.ok) throw new Error(made.error.message);
      return creds(appId, made.value);
    },
    request,
    gql: (auth, query, variables) => request('POST', '/graphql', { auth, body: { query, variables } }),
    async close() {
      await web.close();
      forgetContract(base);
      await workers?.close();
      // Every flow this file ran is checked against the event catalog once its writers stopped
      // (not when the file left Postgres unreachable: then there is nothing to read).
      const offCatalog = await offCatalogEvents(deps.sql).catch(() => []);
      await closeDeps(deps);
      await t.dropDatabase();
      if (offCatalog.length)
        throw new Error(`system events that break their catalog schema (src/ledger/event-types.ts):\n${offCatalog.join('\n')}`);
    },
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface ChildService {
  proc: ChildProcess;
  output: () => string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** Resolves once a line matching `re` has been printed. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<void>;
  kill(signal?: NodeJS.Signals): void;
}

/** Runs one of the project's entry points (`src/web.ts`, `workers/index.ts`…) as its own process. */
export function spawnService(entry: string, env: Record<string, string>, nodeArgs: string[] = []): ChildService {
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', join(projectRoot(), entry)], {
    cwd: projectRoot(),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of [...waiters])
      if (w.re.test(out)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  };
  proc.stdout!.on('data', onData);
  proc.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return {
    proc,
    output: () => out,
    exited,
    // Start-up on a loaded 2-core CI machine can take well over 20 s (tsx compiles on the fly);
    // below the 60 s hook timeout, so a process that never starts still fails with its output.
    waitFor(re, timeoutMs = 45_000) {
      if (re.test(out)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re} in output:\n${out.slice(-2000)}`)), timeoutMs);
        waiters.push({
          re,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        exited.then((code) => reject(new Error(`process exited (${code}) before ${re}:\n${out.slice(-2000)}`)));
      });
    },
    kill(signal = 'SIGTERM') {
      proc.kill(signal);
    },
  };
}
