import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/auth/api-keys.js';
import { redisReady } from '../../src/availability.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { projectRoot } from '../../src/project-root.js';
import { startWeb, type WebServer } from '../../src/web.js';
import { openSse, type SseClient, type SseFrame } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { commit, stream } from '../stream/helpers.js';

/** Streams re-check their keys this often; a revoked key's streams must end within a few seconds. */
const RECHECK_MS = 500;
const END_WITHIN_MS = 5_000;

let s: TestStack;
// A second web process on the same database and Redis prefix, as in a deployment with several.
let deps2: Deps;
let web2: WebServer;
let base2: string;

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { STREAM_RECHECK_MS: String(RECHECK_MS), STREAM_BACKFILL: '0' } });
  deps2 = createDeps(s.config, { logger: createLogger(s.config.LOG_LEVEL) });
  await redisReady(deps2.redis, 5_000);
  web2 = await startWeb(deps2, 0);
  base2 = `http://127.0.0.1:${web2.port}`;
});
afterAll(async () => {
  await web2?.close();
  if (deps2) await closeDeps(deps2);
  await s?.close();
});

/** `npm run -s cli -- …`, as an operator runs it. */
function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '-s', 'cli', '--', ...args],
      { cwd: projectRoot(), env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...s.env }, timeout: 30_000 },
      (err, _stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

const SUB = 'subscription { eventStream { id eventType } }';
const subscribe = (base: string, auth: AppCredentials) =>
  openSse(`${base}/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...auth.headers },
    body: JSON.stringify({ query: SUB }),
  });

/** The event type a frame carries, for an SSE frame or a GraphQL `next`. */
const typeOf = (f: SseFrame, graphql: boolean): string | undefined => {
  if (!f.data) return undefined;
  const d = JSON.parse(f.data);
  return graphql ? d.data?.eventStream?.eventType : d.eventType;
};

/**
 * Waits until the client receives a probe event: only then is the stream live (it joins the
 * tail asynchronously, so a commit just before that could precede it).
 */
async function live(c: SseClient, appId: string, graphql: boolean) {
  expect(c.status).toBe(200);
  for (let i = 0; i < 100; i++) {
    await commit(s.deps, appId, [{ event_type: 'probe' }]);
    const f = await c.next(300).catch(() => undefined);
    if (f && typeOf(f, graphql) === 'probe') return;
  }
  throw new Error('stream never went live');
}

/** Every frame until the stream ends, failing if it has not ended within `ms`. */
async function framesUntilEnd(c: SseClient, ms: number): Promise<SseFrame[]> {
  const deadline = Date.now() + ms;
  const frames: SseFrame[] = [];
  for (;;) {
    const f = await c.next(Math.max(1, deadline - Date.now()));
    if (!f) return frames;
    frames.push(f);
  }
}

describe('revoking a key ends its open streams in every web process', () => {
  it('ends SSE streams and GraphQL subscriptions of the revoked key on both processes, and no others', async () => {
    const owner = await s.createApp();
    const doomed = await s.createKey(owner.appId, ['events:read']);
    const kept = await s.createKey(owner.appId, ['events:read']);

    const sse1 = await stream(s.base, doomed);
    const sse2 = await stream(base2, doomed);
    const gql1 = await subscribe(s.base, doomed);
    const gql2 = await subscribe(base2, doomed);
    const keptSse = await stream(base2, kept);
    const keptGql = await subscribe(s.base, kept);
    const all = [
      [sse1, false],
      [sse2, false],
      [gql1, true],
      [gql2, true],
      [keptSse, false],
      [keptGql, true],
    ] as const;
    for (const [c, graphql] of all) await live(c, owner.appId, graphql);

    const started = Date.now();
    // The function `cli key revoke` runs.
    expect(await revokeApiKey(s.deps.sql, doomed.keyId)).toBe(true);
    const [f1, f2, g1, g2] = await Promise.all([sse1, sse2, gql1, gql2].map((c) => framesUntilEnd(c, END_WITHIN_MS)));
    expect(Date.now() - started).toBeLessThan(END_WITHIN_MS);

    // SSE: the last frame says why, in the error body REST uses.
    for (const frames of [f1, f2]) {
      const last = frames.at(-1)!;
      expect(last.event).toBe('error');
      expect(JSON.parse(last.data!).error.code).toBe('UNAUTHORIZED');
    }
    // GraphQL: a `next` carrying the UNAUTHORIZED error, then `complete`.
    for (const frames of [g1, g2]) {
      const events = frames.filter((f) => f.event !== 'next' || JSON.parse(f.data!).errors);
      expect(events.map((f) => f.event)).toEqual(['next', 'complete']);
      expect(JSON.parse(events[0].data!).errors[0].extensions.code).toBe('UNAUTHORIZED');
    }

    // The application's other key keeps streaming.
    await commit(s.deps, owner.appId, [{ event_type: 'after.revoke' }]);
    for (const [c, graphql] of [
      [keptSse, false],
      [keptGql, true],
    ] as const) {
      let seen: string | undefined;
      for (let i = 0; i < 50 && seen !== 'after.revoke'; i++) {
        const f = await c.next(5_000);
        expect(f, 'the kept stream ended').toBeDefined();
        seen = typeOf(f!, graphql);
      }
      expect(seen).toBe('after.revoke');
      c.close();
    }
  });

  it('ends a stream whose key an operator revokes with the CLI (another process, no Redis)', async () => {
    const owner = await s.createApp();
    const key = await s.createKey(owner.appId, ['events:read']);
    const c = await stream(base2, key);
    expect(c.status).toBe(200);
    const r = await cli(['key', 'revoke', key.keyId]);
    expect(r.code, r.stderr).toBe(0);
    const frames = await framesUntilEnd(c, END_WITHIN_MS);
    expect(frames.at(-1)?.event).toBe('error');
  });

  it('refuses a new stream with the revoked key', async () => {
    const owner = await s.createApp();
    const key = await s.createKey(owner.appId, ['events:read']);
    expect(await revokeApiKey(s.deps.sql, key.keyId)).toBe(true);
    const c = await stream(base2, key);
    expect(c.status).toBe(401);
  });
});
