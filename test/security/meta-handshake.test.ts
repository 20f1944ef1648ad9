import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect } from '../inbound/helpers.js';

let s: TestStack;
const apps: AppCredentials[] = [];
const CONNECTIONS = 24;
const tokenOf = (i: number) => `verify-token-${i}-secret`;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  for (let a = 0; a < 3; a++) apps.push(await s.createApp());
  for (let i = 0; i < CONNECTIONS; i++) {
    const config = {
      access_token: `at-${i}`,
      phone_number_id: String(5550000 + i),
      business_account_id: String(7770000 + i),
      app_secret: `as-${i}`,
      verify_token: tokenOf(i),
    };
    await connect(s, apps[i % apps.length], 'WHATSAPP', config, `wa ${i}`);
  }
});
afterAll(() => s?.close());

/**
 * Counts the statements the service sends while `fn` runs: every query is a call of the
 * tagged-template function, so the stack's `sql` is swapped for a counting proxy of itself.
 */
async function countingStatements<T>(fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const real = s.deps.sql;
  const statements: string[] = [];
  s.deps.sql = new Proxy(real, {
    apply(target, thisArg, args: unknown[]) {
      const strings = args[0] as TemplateStringsArray | undefined;
      statements.push(Array.isArray(strings) ? strings.join('$') : String(strings));
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args);
    },
  }) as Sql;
  try {
    return { result: await fn(), statements };
  } finally {
    s.deps.sql = real;
  }
}

const handshake = async (token: string, challenge = 'ch-123') => {
  const r = await fetch(
    `${s.base}/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(token)}&hub.challenge=${challenge}`,
  );
  return { status: r.status, text: await r.text() };
};

describe('the public Meta verification handshake is one indexed lookup', () => {
  it('answers the challenge of the connection whose token matches with one statement, whatever the number of connections', async () => {
    const { result, statements } = await countingStatements(() => handshake(tokenOf(CONNECTIONS - 1)));
    expect(result).toEqual({ status: 200, text: 'ch-123' });
    expect(statements).toHaveLength(1);
  });

  it('refuses an unknown token with 403 after the same single statement', async () => {
    const { result, statements } = await countingStatements(() => handshake('not-a-token-of-anyone'));
    expect(result.status).toBe(403);
    expect(statements).toHaveLength(1);
  });

  it('stores a keyed hash of the verify token, never the token or its plain hash', async () => {
    const rows = await s.deps.sql<{ verify_token_hash: string | null; config_public: Record<string, unknown> }[]>`
      SELECT verify_token_hash, config_public FROM platform_connections WHERE name = 'wa 3'`;
    expect(rows).toHaveLength(1);
    const stored = rows[0].verify_token_hash;
    expect(stored).toMatch(/^[0-9a-f]{64}$/);
    expect(stored).not.toBe(createHash('sha256').update(tokenOf(3)).digest('hex'));
    expect(JSON.stringify(rows[0])).not.toContain(tokenOf(3));
  });

  it('finds the connection through the index (EXPLAIN)', async () => {
    await s.deps.sql`ANALYZE platform_connections`;
    const plan = await s.deps.sql.begin(async (tx) => {
      await tx`SET LOCAL enable_seqscan = off`;
      return tx<
        { 'QUERY PLAN': string }[]
      >`EXPLAIN SELECT id FROM platform_connections WHERE platform = 'WHATSAPP' AND status = 'ACTIVE' AND (verify_token_hash = ${'0'.repeat(64)} OR verify_token_hash IS NULL)`;
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/platform_connections_verify_token_idx/);
  });

  it('fills the hash of a connection stored before it existed on its first handshake, then finds it by the index', async () => {
    await s.deps.sql`UPDATE platform_connections SET verify_token_hash = NULL WHERE name = 'wa 5'`;
    expect(await handshake(tokenOf(5), 'legacy')).toEqual({ status: 200, text: 'legacy' });
    const [row] = await s.deps.sql<
      { verify_token_hash: string | null }[]
    >`SELECT verify_token_hash FROM platform_connections WHERE name = 'wa 5'`;
    expect(row.verify_token_hash).toMatch(/^[0-9a-f]{64}$/);
    const { result, statements } = await countingStatements(() => handshake(tokenOf(5), 'again'));
    expect(result).toEqual({ status: 200, text: 'again' });
    expect(statements).toHaveLength(1);
  });

  it('keeps the hash in step when the verify token is changed, and ignores disabled connections', async () => {
    const [row] = await s.deps.sql<{ id: string; app_id: string }[]>`SELECT id, app_id FROM platform_connections WHERE name = 'wa 7'`;
    const auth = apps.find((a) => a.appId === row.app_id)!;
    const patched = await s.request('PATCH', `/v1/platform-connections/${row.id}`, {
      auth,
      body: { config: { verify_token: 'rotated-verify-token' } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect((await handshake(tokenOf(7))).status).toBe(403);
    expect(await handshake('rotated-verify-token', 'rot')).toEqual({ status: 200, text: 'rot' });
    const disabled = await s.request('PATCH', `/v1/platform-connections/${row.id}`, { auth, body: { status: 'DISABLED' } });
    expect(disabled.status).toBe(200);
    expect((await handshake('rotated-verify-token')).status).toBe(403);
  });
});
