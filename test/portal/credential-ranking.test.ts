import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR, SCOPES, type Scope } from '../../src/auth/scopes.js';
import { PORTAL_AREAS, type PortalArea, scopesWithin } from '../../src/portal/areas.js';
import { createSignIn } from '../../src/portal/sessions.js';
import { projectRoot } from '../../src/project-root.js';
import { runCli } from '../helpers/cli.js';
import { asSession as asSessionOf, exchangeLink, type SignedIn } from '../helpers/portal.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let app: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  app = await s.createApp();
});
afterAll(() => s.close());

type Session = SignedIn & { scopes: Scope[] };

const exchange = async (url: string): Promise<Session> => {
  const si = await exchangeLink(s, url);
  return { ...si, scopes: si.body.scopes };
};

/** A session made by the operator with exactly these scopes, over the whole API. */
async function operatorSession(scopes: Scope[]): Promise<Session> {
  const made = await createSignIn(s.deps.sql, OPERATOR, { appId: app.appId, areas: ['all'], scopes, expiresInSeconds: 600 });
  if (!made.ok) throw new Error(made.error.message);
  return exchange(`${s.config.PUBLIC_BASE_URL}/portal/signin#token=${made.value.token}`);
}

const asSession = (si: SignedIn, method: string, path: string, body?: unknown) => asSessionOf(s, si, method, path, body);

const credentialCount = async () => {
  const [{ keys, sessions }] = await s.deps.sql<{ keys: number; sessions: number }[]>`
    SELECT (SELECT count(*)::int FROM api_keys WHERE app_id = ${app.appId}) AS keys,
           (SELECT count(*)::int FROM portal_sessions WHERE app_id = ${app.appId}) AS sessions`;
  return { keys, sessions };
};

const inOrder = (scopes: readonly Scope[]) => SCOPES.filter((x) => scopes.includes(x));

describe('a portal session made by an admin-only key (the reported escalation)', () => {
  it('holds only admin: it cannot write events, read users or make a key with scopes its maker lacks', async () => {
    const adminOnly = await s.createKey(app.appId, ['admin']);
    const direct = await s.request('POST', '/v1/api-keys', { auth: adminOnly, body: { scopes: ['events:write'] } });
    expect(direct.status).toBe(403);

    const link = await s.request('POST', '/v1/portal/sessions', { auth: adminOnly, body: {} });
    expect(link.status, link.text).toBe(201);
    const si = await exchange(link.json.url);

    const before = await credentialCount();
    const write = await asSession(si, 'POST', '/v1/events', { event_type: 'ranking.escalated', payload: {} });
    expect(write.status, write.text).toBe(403);
    expect(write.json.error.code).toBe('FORBIDDEN');
    expect((await asSession(si, 'GET', '/v1/users')).status).toBe(403);
    const gql = await asSession(si, 'POST', '/graphql', {
      query: 'mutation { createEvent(eventType: "ranking.gql", payload: {}) { id } }',
    });
    expect(gql.json.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const fullKey = await asSession(si, 'POST', '/v1/api-keys', { scopes: [...SCOPES] });
    expect(fullKey.status, fullKey.text).toBe(403);
    expect(fullKey.json.error.code).toBe('FORBIDDEN');
    expect(await credentialCount()).toEqual(before);
    const [{ n }] = await s.deps.sql`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId} AND event_type LIKE 'ranking.%'`;
    expect(n).toBe(0);

    expect(link.json.scopes).toEqual(['admin']);
    expect(si.scopes).toEqual(['admin']);
    // What it does hold, it may pass on.
    const adminKey = await asSession(si, 'POST', '/v1/api-keys', { scopes: ['admin'] });
    expect(adminKey.status, adminKey.text).toBe(201);
    expect(adminKey.json.scopes).toEqual(['admin']);
  });
});

/**
 * Every way a credential is made: given the caller's scopes, a caller that asks for scopes
 * (and areas, for a session) and tells what it was answered and, when it made one, the scopes
 * the new credential holds.
 */
type Face = (
  caller: Scope[],
) => Promise<(requested: Scope[], areas: PortalArea[]) => Promise<{ status: number; code?: string; made?: Scope[] }>>;

const FACES: Record<string, Face> = {
  'API key → API key (REST)': async (caller) => {
    const key = await s.createKey(app.appId, caller);
    return async (requested) => {
      const r = await s.request('POST', '/v1/api-keys', { auth: key, body: { scopes: requested } });
      return { status: r.status, code: r.json?.error?.code, made: r.json?.scopes };
    };
  },
  'API key → portal session (REST)': async (caller) => {
    const key = await s.createKey(app.appId, caller);
    return async (requested, areas) => {
      const r = await s.request('POST', '/v1/portal/sessions', { auth: key, body: { scopes: requested, areas } });
      if (r.status !== 201) return { status: r.status, code: r.json?.error?.code };
      // What the signed-in session says it holds is what the link promised.
      const si = await exchange(r.json.url);
      expect(si.scopes).toEqual(r.json.scopes);
      return { status: r.status, made: si.scopes };
    };
  },
  'portal session → API key (REST)': async (caller) => {
    const si = await operatorSession(caller);
    return async (requested) => {
      const r = await asSession(si, 'POST', '/v1/api-keys', { scopes: requested });
      return { status: r.status, code: r.json?.error?.code, made: r.json?.scopes };
    };
  },
  'portal session → portal session (REST)': async (caller) => {
    const si = await operatorSession(caller);
    return async (requested, areas) => {
      const r = await asSession(si, 'POST', '/v1/portal/sessions', { scopes: requested, areas });
      return { status: r.status, code: r.json?.error?.code, made: r.json?.scopes };
    };
  },
};

describe('no credential outranks its maker', () => {
  for (const [name, face] of Object.entries(FACES)) {
    it(`${name}: the credential made never holds a scope its caller lacks; asking for one is 403 and makes nothing`, async () => {
      const scopeSet = fc.subarray([...SCOPES], { minLength: 1 });
      await fc.assert(
        fc.asyncProperty(scopeSet, scopeSet, fc.subarray([...PORTAL_AREAS], { minLength: 1 }), async (caller, requested, areas) => {
          const make = await face(caller);
          const before = await credentialCount();
          const out = await make(requested, areas);
          const after = await credentialCount();
          const beyond = requested.some((x) => !caller.includes(x));
          if (out.status === 201) {
            expect(beyond).toBe(false);
            expect(out.made?.every((x) => caller.includes(x))).toBe(true);
            // A key holds exactly what was asked; a session what was asked, as far as its areas use it.
            expect(out.made).toEqual(name.endsWith('API key (REST)') ? inOrder(requested) : scopesWithin(areas, inOrder(requested)));
            return;
          }
          expect(after).toEqual(before);
          if (beyond || !caller.includes('admin') || name.startsWith('portal session → portal session')) {
            expect(out.status).toBe(403);
            expect(out.code).toBe('FORBIDDEN');
          } else {
            // Asked for nothing its areas use: a clear 400, not a session that can do nothing.
            expect(out.status).toBe(400);
            expect(scopesWithin(areas, requested)).toEqual([]);
          }
        }),
        { numRuns: 25 },
      );
    });
  }

  it('the operator CLI grants what is asked, a portal session only what its areas use', async () => {
    const key = await runCli(s.env, ['key', 'create', '--app', app.appId, '--scopes', 'events:read,admin']);
    expect(key.code, key.stderr).toBe(0);
    expect(JSON.parse(key.stdout).scopes).toEqual(['events:read', 'admin']);
    const portal = await runCli(s.env, ['portal', 'open', '--app', app.appId, '--areas', 'webhooks']);
    expect(portal.code, portal.stderr).toBe(0);
    const link = JSON.parse(portal.stdout);
    expect(link.scopes).toEqual(['admin']);
    expect((await exchange(link.url)).scopes).toEqual(['admin']);
  });

  it('credentials are made in two places only, each behind the rule (a new way to make one fails here)', () => {
    const sites: Record<string, string[]> = {};
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        if (!e.name.endsWith('.ts')) continue;
        const text = readFileSync(path, 'utf8');
        const inserts = text.match(/INSERT\s+INTO\s+(api_keys|portal_sessions)\b/gi);
        if (!inserts) continue;
        sites[path.slice(projectRoot().length + 1)] = inserts;
        expect(text, path).toMatch(/grantScopes\(maker, /);
      }
    };
    walk(join(projectRoot(), 'src'));
    walk(join(projectRoot(), 'workers'));
    expect(sites).toEqual({
      'src/auth/api-keys.ts': ['INSERT INTO api_keys'],
      'src/portal/sessions.ts': ['INSERT INTO portal_sessions'],
    });
  });

  it('GraphQL makes no credential: no mutation hands out a key or a session', async () => {
    const r = await s.gql(app, '{ __type(name: "Mutation") { fields { name } } }');
    const names: string[] = r.json.data.__type.fields.map((f: { name: string }) => f.name);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => /key|session|token|credential|scope/i.test(n))).toEqual([]);
  });
});
