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

  // Each case is an `npm run` of its own, run side by side: on a loaded machine one takes seconds.
  it('--help prints the commands (top level, per noun, per command) on stdout and exits 0, without a database', {
    timeout: 120_000,
  }, async () => {
    const noDb = { ...s.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' };
    const cases = [
      [['--help'], [/app create --name NAME/, /key create --app APP_ID/, /dead requeue/, /portal open/, /--verbose/]],
      [['help'], [/app create --name NAME/]],
      [
        ['key', '--help'],
        [/key create --app APP_ID/, /key revoke KEY_ID/],
      ],
      [
        ['key', 'create', '--help'],
        [/key create --app APP_ID \[--scopes a,b\]/, /prints/i],
      ],
      [['dead', 'requeue', '-h'], [/dead requeue --queue Q JOB_ID/]],
    ] as [string[], RegExp[]][];
    const results = await Promise.all(cases.map(([args]) => runCli(noDb, args)));
    for (const [[args, shows], r] of cases.map((c, i) => [c, results[i]] as const)) {
      expect(r.code, args.join(' ')).toBe(0);
      for (const re of shows) expect(r.stdout, args.join(' ')).toMatch(re);
      expect(r.stderr, args.join(' ')).toBe('');
    }
  });

  it('answers user errors and database errors with one line on stderr, no stack, and a non-zero exit', { timeout: 240_000 }, async () => {
    const noDb = { ...s.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' };
    const missingDb = { ...s.env, DATABASE_URL: s.env.DATABASE_URL.replace(/\/[^/]+$/, '/gw_no_such_database_here') };
    const cases = [
      [s.env, ['--bogus'], /unknown option '--bogus'/i, 2],
      [s.env, ['bogus', 'thing'], /unknown command "bogus thing".*--help/, 2],
      [s.env, ['app'], /unknown command "app".*--help/, 2],
      [s.env, ['dead', 'requeue', '--queue', 'ledger'], /usage: .*dead requeue/, 2],
      [s.env, ['dead', 'list', '--queue', 'nope'], /--queue must be one of/, 2],
      [noDb, ['app', 'list'], /cannot reach PostgreSQL.*ECONNREFUSED/, 1],
      [missingDb, ['app', 'list'], /database error: database "gw_no_such_database_here" does not exist/, 1],
    ] as [Record<string, string>, string[], RegExp, number][];
    for (const [env, args, message, code] of cases) {
      const r = await runCli(env, args);
      const where = `${args.join(' ')}: ${r.stderr}`;
      expect(r.code, where).toBe(code);
      expect(r.stdout, where).toBe('');
      expect(r.stderr.trim().split('\n'), where).toHaveLength(1);
      expect(r.stderr, where).toMatch(message);
      expect(r.stderr, where).not.toMatch(/\n\s+at /);
    }
  });

  it('--verbose adds the stack trace to a failure', { timeout: 60_000 }, async () => {
    const r = await runCli({ ...s.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' }, ['app', 'list', '--verbose']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach PostgreSQL/);
    expect(r.stderr).toMatch(/\n\s+at /);
  });
});
