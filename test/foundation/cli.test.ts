import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '../../src/auth/api-keys.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { runCli } from '../helpers/cli.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ workers: false });
});
afterAll(() => s.close());

const cli = (args: string[]) => runCli(s.env, args);

/** The one JSON line a command prints. */
function oneJsonLine(stdout: string): Record<string, any> {
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}

const authOk = async (appId: string, apiKey: string) =>
  authenticate(s.deps.sql, s.web.services.stamps, { authorization: `Bearer ${apiKey}`, appId }, { appIdRequired: true });

describe('operator CLI', () => {
  it('app create --name prints {app_id, api_key} on one line; the key works with every scope', async () => {
    const r = await cli(['app', 'create', '--name', 'Acme Corp']);
    expect(r.code).toBe(0);
    const out = oneJsonLine(r.stdout);
    expect(out.app_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.api_key).toEqual(expect.any(String));
    const auth = await authOk(out.app_id, out.api_key);
    expect(auth.ok && auth.value.scopes.sort()).toEqual([...SCOPES].sort());
    // Shown once: only a hash is stored.
    const rows = await s.deps.sql`SELECT key_hash::text AS h FROM api_keys WHERE app_id = ${out.app_id}`;
    expect(JSON.stringify(rows)).not.toContain(out.api_key);
  });

  it('app create --scopes limits the key to those scopes', async () => {
    const out = oneJsonLine((await cli(['app', 'create', '--name', 'reader', '--scopes', 'events:read,users:read'])).stdout);
    const auth = await authOk(out.app_id, out.api_key);
    expect(auth.ok && auth.value.scopes.sort()).toEqual(['events:read', 'users:read']);
  });

  it('key create --app adds a key; key revoke stops it; app list shows the application', async () => {
    const app = oneJsonLine((await cli(['app', 'create', '--name', 'keys-test'])).stdout);
    const created = await cli(['key', 'create', '--app', app.app_id, '--scopes', 'events:write']);
    expect(created.code).toBe(0);
    const key = oneJsonLine(created.stdout);
    expect(key.key_id).toMatch(/^[0-9a-f-]{36}$/);
    const auth = await authOk(app.app_id, key.api_key);
    expect(auth.ok && auth.value.scopes).toEqual(['events:write']);

    const revoked = await cli(['key', 'revoke', key.key_id]);
    expect(revoked.code).toBe(0);
    expect(oneJsonLine(revoked.stdout)).toMatchObject({ key_id: key.key_id, revoked: true });
    expect((await authOk(app.app_id, key.api_key)).ok).toBe(false);
    // The application's first key still works.
    expect((await authOk(app.app_id, app.api_key)).ok).toBe(true);

    const list = await cli(['app', 'list']);
    expect(list.code).toBe(0);
    const apps = list.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(apps.find((a) => a.app_id === app.app_id)).toMatchObject({ name: 'keys-test', active_keys: 1 });
  });

  it('refuses bad input with a message on stderr and a non-zero exit, printing nothing on stdout', async () => {
    const cases: [string[], RegExp][] = [
      [['app', 'create'], /--name/],
      [['app', 'create', '--name', 'x', '--scopes', 'events:read,root'], /unknown scope "root"/],
      [['key', 'create', '--app', '00000000-0000-4000-8000-000000000000'], /existing application/],
      [['key', 'revoke', 'not-a-key'], /no active key/],
      [['bogus'], /usage/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr).toMatch(message);
      expect(r.stdout.trim()).toBe('');
    }
  });
});
