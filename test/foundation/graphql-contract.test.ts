import { getNamedType, isObjectType, type GraphQLField } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSchema } from '../../src/graphql/schema.js';
import { upsertPlatformUser } from '../../src/identity/platform-users.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { seedConnection } from '../identity/fixtures.js';

let s: TestStack;
let a: AppCredentials;
let userId: string;
let subscriptionId: string;

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
  const connectionId = await seedConnection(s, a.appId, 'TELEGRAM');
  userId = (await upsertPlatformUser(s.deps.sql, { appId: a.appId, connectionId, platform: 'TELEGRAM', externalId: '42' })).user_id;
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: a,
    body: { name: 'logs', target_url: 'https://example.com/hook', event_patterns: ['*'] },
  });
  subscriptionId = sub.json.id;
});
afterAll(() => s.close());

/** Every field of the schema taking `first`, with the type it is on. */
function pagedFields(): { type: string; field: GraphQLField<unknown, unknown> }[] {
  const schema = createSchema();
  return Object.values(schema.getTypeMap())
    .filter(isObjectType)
    .filter((t) => !t.name.startsWith('__'))
    .flatMap((t) =>
      Object.values(t.getFields()).flatMap((field) => (field.args.some((x) => x.name === 'first') ? [{ type: t.name, field }] : [])),
    );
}

/** A document selecting `field(first: n)` wherever its type is reached from, with the arguments it needs. */
function documentFor(type: string, field: GraphQLField<unknown, unknown>, first: number): string {
  const extra = field.name === 'webhookDeliveryLogs' ? `, webhookSubscriptionId: "${subscriptionId}"` : '';
  const selection = `${field.name}(first: ${first}${extra}) { __typename }`;
  if (type === 'Query') return `{ ${selection} }`;
  if (type === 'User') return `{ user(id: "${userId}") { ${selection} } }`;
  throw new Error(`no way to reach ${type}.${field.name} in this test: add one`);
}

describe('GraphQL descriptions match behaviour', () => {
  it('finds the paged fields', () => {
    expect(pagedFields().map(({ type, field }) => `${type}.${field.name}`)).toEqual(
      expect.arrayContaining(['Query.events', 'Query.users', 'Query.conversations', 'Query.webhookDeliveryLogs', 'User.events']),
    );
  });

  it('every `first` takes 1 to the maximum its description states, and refuses 0 and one more with VALIDATION_ERROR at first', async () => {
    for (const { type, field } of pagedFields()) {
      const where = `${type}.${field.name}`;
      const stated = /`first` is 1 to (\d+); outside that the (query|field) is refused \(VALIDATION_ERROR\)/.exec(field.description ?? '');
      expect(stated, `${where}: its description states the range of first`).not.toBeNull();
      const max = Number(stated![1]);
      expect(getNamedType(field.args.find((x) => x.name === 'first')!.type).name).toBe('Int');
      const taken = await s.gql(a, documentFor(type, field, max));
      expect(taken.json.errors, `${where} first: ${max}`).toBeUndefined();
      for (const n of [0, max + 1]) {
        const refused = await s.gql(a, documentFor(type, field, n));
        expect(refused.json.errors?.[0]?.extensions, `${where} first: ${n}`).toMatchObject({ code: 'VALIDATION_ERROR', path: ['first'] });
        expect(refused.json.errors[0].message, `${where} first: ${n}`).toBe(`first must be between 1 and ${max}`);
      }
    }
  });
});

describe('GraphQL inputs are strict', () => {
  it('refuses an unknown input field or argument before anything runs', async () => {
    const count = async () => (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${a.appId}`)[0].n;
    const before = await count();
    const edge = await s.gql(
      a,
      `mutation { createEvent(eventType: "order.placed", edges: [{ edgeType: "by", targetNodeType: FILE, targetNodeId: "x", weight: 2 }]) { id } }`,
    );
    expect(edge.json.errors[0].message).toMatch(/"weight" is not defined by type "EdgeInput"/);
    const arg = await s.gql(a, `mutation { createEvent(eventType: "order.placed", origin_event_id: "x") { id } }`);
    expect(arg.json.errors[0].message).toMatch(/Unknown argument "origin_event_id"/);
    expect(await count()).toBe(before);
  });
});
