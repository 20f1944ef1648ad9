import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waText } from '../fakes/inbound/payloads.js';
import { metaHeaders } from '../fakes/inbound/signers.js';
import { connect, eventsOf, postWebhook, queuesIdle, waitForEvent } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger'] });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(() => s?.close());

/**
 * A config per platform kind that has a routing id, built around `n` so that each test owns
 * its accounts; `other` gives the same platform a different account.
 */
function configOf(platform: string, n: number): Record<string, unknown> {
  const d = (len: number) => String(n).padStart(len, '9');
  switch (platform) {
    case 'WHATSAPP':
      return {
        access_token: 't',
        phone_number_id: `10${d(8)}`,
        business_account_id: `20${d(8)}`,
        app_secret: 'app-secret',
        verify_token: 'v',
      };
    case 'MESSENGER':
      return { page_access_token: 't', page_id: `30${d(8)}`, app_secret: 'app-secret', verify_token: 'v' };
    case 'INSTAGRAM':
      return { page_access_token: 't', ig_account_id: `40${d(8)}`, page_id: `41${d(8)}`, app_secret: 'app-secret', verify_token: 'v' };
    case 'SLACK':
      return { bot_token: 'xoxb-1', signing_secret: 's', bot_user_id: `U${d(8)}` };
    case 'DISCORD':
      return { bot_token: 'b', application_id: `5${d(17)}`, public_key: 'ab'.repeat(32) };
    case 'SMS':
      return { account_sid: `AC${'a1'.repeat(16)}`, auth_token: 't', from: `+1555${d(7)}` };
    case 'EMAIL':
      return { smtp_url: 'smtp://u:p@127.0.0.1:2525', from: `Help <help${n}@example.com>` };
    default:
      throw new Error(platform);
  }
}
const PLATFORMS = ['WHATSAPP', 'MESSENGER', 'INSTAGRAM', 'SLACK', 'DISCORD', 'SMS', 'EMAIL'] as const;
let seq = 1000;

const create = (auth: AppCredentials, platform: string, config: Record<string, unknown>) =>
  s.request('POST', '/v1/platform-connections', { auth, body: { platform_name: platform, name: `${platform} ${seq}`, config } });

/** The 409 must not say whose the account is. */
function expectOpaqueConflict(r: { status: number; text: string; json: any }, owner: { appId: string; connectionId: string }) {
  expect(r.status, r.text).toBe(409);
  expect(r.json.error.code).toBe('PLATFORM_CONNECTION_CONFLICT');
  expect(r.text).not.toContain(owner.appId);
  expect(r.text).not.toContain(owner.connectionId);
}

describe.each(PLATFORMS)('%s routing id belongs to one connection across applications', (platform) => {
  it('refuses a second application creating a connection for the same account (REST)', async () => {
    const config = configOf(platform, ++seq);
    const first = await create(a, platform, config);
    expect(first.status, first.text).toBe(201);
    const second = await create(b, platform, config);
    expectOpaqueConflict(second, { appId: a.appId, connectionId: first.json.id });
    // Nothing was written for the refused one.
    expect((await s.request('GET', '/v1/platform-connections', { auth: b })).json.data.map((c: { name: string }) => c.name)).not.toContain(
      `${platform} ${seq}`,
    );
  });

  it('refuses moving another connection onto a taken account with PATCH, leaving it unchanged', async () => {
    const taken = configOf(platform, ++seq);
    const owner = await create(a, platform, taken);
    expect(owner.status, owner.text).toBe(201);
    const mine = await create(b, platform, configOf(platform, ++seq));
    expect(mine.status, mine.text).toBe(201);
    const patch = await s.request('PATCH', `/v1/platform-connections/${mine.json.id}`, { auth: b, body: { config: taken } });
    expectOpaqueConflict(patch, { appId: a.appId, connectionId: owner.json.id });
    const after = await s.request('GET', `/v1/platform-connections/${mine.json.id}`, { auth: b });
    expect(after.json.config).toEqual(mine.json.config);
  });

  it('frees the account when its connection or its application is deleted', async () => {
    // The claims are not cascaded from the connection (a reference table cannot reference a
    // sharded one, docs/SCALING.md §8): the code deletes them with it.
    const config = configOf(platform, ++seq);
    const first = await create(a, platform, config);
    expect(first.status, first.text).toBe(201);
    expect((await s.request('DELETE', `/v1/platform-connections/${first.json.id}`, { auth: a })).status).toBe(204);
    const second = await create(b, platform, config);
    expect(second.status, second.text).toBe(201);
    const gone = await s.createApp();
    const other = configOf(platform, ++seq);
    expect((await create(gone, platform, other)).status).toBe(201);
    await s.deps.sql`DELETE FROM applications WHERE id = ${gone.appId}`;
    const third = await create(b, platform, other);
    expect(third.status, third.text).toBe(201);
  });

  it('answers PLATFORM_CONNECTION_CONFLICT through GraphQL too', async () => {
    const config = configOf(platform, ++seq);
    const first = await create(a, platform, config);
    expect(first.status, first.text).toBe(201);
    const r = await s.gql(
      b,
      'mutation($c: JSON!, $p: PlatformName!) { createPlatformConnection(platformName: $p, name: "dup", config: $c) { id } }',
      {
        c: config,
        p: platform,
      },
    );
    expect(r.json.errors?.[0]?.extensions?.code, r.text).toBe('PLATFORM_CONNECTION_CONFLICT');
    expect(r.text).not.toContain(a.appId);
    expect(r.text).not.toContain(first.json.id);
    const mine = await create(b, platform, configOf(platform, ++seq));
    expect(mine.status, mine.text).toBe(201);
    const u = await s.gql(b, 'mutation($id: ID!, $c: JSON!) { updatePlatformConnection(id: $id, config: $c) { id } }', {
      id: mine.json.id,
      c: config,
    });
    expect(u.json.errors?.[0]?.extensions?.code, u.text).toBe('PLATFORM_CONNECTION_CONFLICT');
    expect(u.text).not.toContain(first.json.id);
  });
});

describe('routing id ownership', () => {
  it('documents the 409 on create and update in the OpenAPI document', async () => {
    const doc = (await s.request('GET', '/v1/openapi.json')).json;
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toContain('PLATFORM_CONNECTION_CONFLICT');
    expect(doc.paths['/v1/platform-connections'].post.responses['409'].description).toContain('PLATFORM_CONNECTION_CONFLICT');
    const item = Object.entries(doc.paths).find(([p]) => /^\/v1\/platform-connections\/[{:]id}?$/.test(p))?.[1] as {
      patch: { responses: Record<string, { description: string }> };
    };
    expect(item.patch.responses['409'].description).toContain('PLATFORM_CONNECTION_CONFLICT');
  });

  it('lets exactly one of two applications win a concurrent create of the same account', async () => {
    for (const platform of ['WHATSAPP', 'EMAIL'] as const) {
      const config = configOf(platform, ++seq);
      const results = await Promise.all([create(a, platform, config), create(b, platform, config)]);
      expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join('\n')).toEqual([201, 409]);
      const [{ n }] = await s.deps.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM platform_connections WHERE platform = ${platform} AND config_public->>'from' IS NOT DISTINCT FROM ${(config.from as string) ?? null}
           AND config_public->>'phone_number_id' IS NOT DISTINCT FROM ${(config.phone_number_id as string) ?? null}`;
      expect(n).toBe(1);
    }
  });

  it('treats e-mail addresses case-insensitively and regardless of display name', async () => {
    const first = await create(a, 'EMAIL', { smtp_url: 'smtp://u:p@127.0.0.1:2525', from: 'Sales@Example.org' });
    expect(first.status, first.text).toBe(201);
    const second = await create(b, 'EMAIL', { smtp_url: 'smtp://u:p@127.0.0.1:2525', from: 'Other Name <sales@example.org>' });
    expectOpaqueConflict(second, { appId: a.appId, connectionId: first.json.id });
  });

  it('keeps the account with a disabled connection and frees it when the connection is deleted', async () => {
    const config = configOf('MESSENGER', ++seq);
    const first = await create(a, 'MESSENGER', config);
    expect(first.status, first.text).toBe(201);
    const disabled = await s.request('PATCH', `/v1/platform-connections/${first.json.id}`, { auth: a, body: { status: 'DISABLED' } });
    expect(disabled.status, disabled.text).toBe(200);
    expect((await create(b, 'MESSENGER', config)).status).toBe(409);
    // Re-enabling its own connection can never collide.
    expect((await s.request('PATCH', `/v1/platform-connections/${first.json.id}`, { auth: a, body: { status: 'ACTIVE' } })).status).toBe(
      200,
    );
    expect((await s.request('DELETE', `/v1/platform-connections/${first.json.id}`, { auth: a })).status).toBe(204);
    expect((await create(b, 'MESSENGER', config)).status).toBe(201);
  });

  it('lets a connection keep its own account when its other fields change', async () => {
    const config = configOf('WHATSAPP', ++seq);
    const first = await create(a, 'WHATSAPP', config);
    expect(first.status, first.text).toBe(201);
    const r = await s.request('PATCH', `/v1/platform-connections/${first.json.id}`, {
      auth: a,
      body: { config: { ...config, api_version: 'v22.0' } },
    });
    expect(r.status, r.text).toBe(200);
  });
});

describe('shared Meta URL routes inbound to the unique owner only', () => {
  it('does not copy a payload to a second application that tried to connect the same number', async () => {
    const config = configOf('WHATSAPP', ++seq);
    const owner = await connect(s, a, 'WHATSAPP', config);
    const dup = await create(b, 'WHATSAPP', config);
    expect(dup.status, dup.text).toBe(409);
    const body = JSON.stringify(
      waText(config.business_account_id as string, config.phone_number_id as string, '4915100000', 'wamid.owner-only', 'for A'),
    );
    expect((await postWebhook(s, owner.path, body, metaHeaders('app-secret', body))).status).toBe(200);
    await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.owner-only');
    await queuesIdle(s);
    expect((await eventsOf(s, b.appId, 'message.inbound')).map((e) => e.payload.external_message_id)).not.toContain('wamid.owner-only');
  });

  it("does not give another application's number in the same business account a copy", async () => {
    // B connects a different number of the same WhatsApp business account, with the same
    // app secret: legitimate, but the business account id must not route A's messages to B.
    const mine = configOf('WHATSAPP', ++seq);
    const theirs = { ...configOf('WHATSAPP', ++seq), business_account_id: mine.business_account_id };
    const owner = await connect(s, a, 'WHATSAPP', mine);
    await connect(s, b, 'WHATSAPP', theirs);
    const body = JSON.stringify(
      waText(mine.business_account_id as string, mine.phone_number_id as string, '4915100001', 'wamid.same-waba', 'for A'),
    );
    expect((await postWebhook(s, owner.path, body, metaHeaders('app-secret', body))).status).toBe(200);
    await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.same-waba');
    await queuesIdle(s);
    expect((await eventsOf(s, b.appId, 'message.inbound')).map((e) => e.payload.external_message_id)).not.toContain('wamid.same-waba');
  });
});
