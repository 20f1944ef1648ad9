import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGroupCommit } from '../../src/ledger/group-commit.js';
import { systemEvent } from '../../src/ledger/event-types.js';
import { findUnstorable, storableText } from '../../src/storable-text.js';
import { enqueue, queueFor } from '../../src/queues.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  a = await s.createApp();
});
afterAll(() => s.close());

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('U+0000 and unpaired surrogates, which PostgreSQL cannot store', () => {
  it('is refused in any JSON body with VALIDATION_ERROR naming where, before anything is written or queued', async () => {
    const before = await queueFor(s.deps.queues, 'ledger').getJobCounts('waiting', 'active', 'completed', 'delayed', 'failed');
    const r = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'nul.probe', payload: { note: 'a\u0000b' } } });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['payload', 'note'] }] });
    const key = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'nul.probe', payload: { 'k\u0000': 1 } } });
    expect(key.json.error.details[0].path).toEqual(['payload', 'k\u0000']);
    const surrogate = await s.request('POST', '/v1/events', {
      auth: a,
      body: { event_type: 'nul.probe', payload: { list: ['ok', 'x\ud800'] } },
    });
    expect(surrogate.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['payload', 'list', 1] }] });
    expect(await queueFor(s.deps.queues, 'ledger').getJobCounts('waiting', 'active', 'completed', 'delayed', 'failed')).toEqual(before);
  });

  it('is refused in GraphQL string literals and variables', async () => {
    const literal = await s.gql(a, 'mutation { createEvent(eventType: "nul.probe", payload: {note: "a\\u0000b"}) { id } }');
    expect(literal.json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    const variable = await s.gql(a, 'mutation($p: JSON) { createEvent(eventType: "nul.probe", payload: $p) { id } }', {
      p: { note: 'a\u0000b' },
    });
    expect(variable.status).toBe(400);
    expect(variable.json.error.code).toBe('VALIDATION_ERROR');
  });

  it('is replaced, not refused, in text the service has already accepted (inbound records, ledger writes)', () => {
    expect(findUnstorable({ a: [1, { b: 'x\u0000' }] })).toEqual({ path: ['a', 1, 'b'], problem: 'text' });
    expect(storableText({ text: 'a\u0000b', list: ['\u0000', 'x\udc00', '😀'], 'k\u0000': 1 })).toEqual({
      text: 'a\uFFFDb',
      list: ['\uFFFD', 'x\uFFFD', '😀'],
      'k\uFFFD': 1,
    });
    const clean = { text: 'fine' };
    expect(storableText(clean)).toBe(clean);
  });

  it('stored through the ledger worker comes out replaced instead of failing the job', async () => {
    const id = randomUUID();
    const inbound = systemEvent('message.inbound', {
      message: { text: 'hi\u0000there', role: 'user', type: 'text' },
      platform: 'telegram',
      external_message_id: '1:1',
      conversation_id: randomUUID(),
      timestamp: new Date().toISOString(),
    });
    await enqueue(s.deps.queues, 'ledger', { event: { id, app_id: a.appId, ...inbound, edges: [], attachments: [] } });
    const [row] = await until(async () => {
      const rows = await s.deps.sql<{ payload: { message: { text: string } } }[]>`SELECT payload FROM events WHERE id = ${id}`;
      return rows.length ? rows : undefined;
    }, 'the event');
    expect(row.payload.message.text).toBe('hi\uFFFDthere');
  });
});

describe('unpaired UTF-16 surrogates, which jsonb refuses as JSON escapes', () => {
  it('are refused in JSON bodies with VALIDATION_ERROR naming where (found by the fuzz sweep as a 500)', async () => {
    const schema = await s.request('POST', '/v1/event-schemas', {
      auth: a,
      body: { name: 'lone', json_schema: { '': { '\ud800': null } } },
    });
    expect(schema.status).toBe(400);
    expect(schema.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['json_schema', '', '\ud800'] }] });
    const ev = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'lone.probe', payload: { note: 'x\udc00' } } });
    expect(ev.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['payload', 'note'] }] });
    // A properly paired surrogate (an emoji) is ordinary text.
    expect(
      (await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'lone.probe', payload: { note: '\ud83d\ude00' } } })).status,
    ).toBe(201);
  });

  it('are refused in query parameters too (found by the fuzz sweep as a 500 on a name filter)', async () => {
    const r = await s.request('GET', `/v1/users?name_contains=${encodeURIComponent('\u0000abc')}`, { auth: a });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['name_contains'] }] });
  });

  it('are replaced in text the service has already accepted', () => {
    expect(storableText({ text: 'a\ud800b', 'k\udfff': 1, ok: '\ud83d\ude00' })).toEqual({
      text: 'a\uFFFDb',
      'k\uFFFD': 1,
      ok: '\ud83d\ude00',
    });
  });
});

describe('a poison event in a group-commit batch', () => {
  it('fails alone: the callers it shared a batch with still commit', async () => {
    const flushed: string[][] = [];
    const commit = createGroupCommit(async (items: string[]) => {
      flushed.push(items);
      if (items.includes('bad')) throw Object.assign(new Error('invalid input syntax for type uuid'), { code: '22P02' });
      return items.length;
    }, 10);
    const results = await Promise.allSettled(['a', 'bad', 'b', 'c'].map((x) => commit(x)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(flushed[0]).toEqual(['a', 'bad', 'b', 'c']);
  });

  it('does not split a batch that failed because the database is unreachable', async () => {
    let calls = 0;
    const commit = createGroupCommit(async () => {
      calls++;
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    }, 10);
    const results = await Promise.allSettled(['a', 'b', 'c'].map((x) => commit(x)));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(calls).toBe(1);
  });

  it('in the real ledger: events queued beside one the database refuses are committed', async () => {
    const good = [randomUUID(), randomUUID(), randomUUID()];
    const bad = randomUUID();
    const event = (id: string, target: string) => ({
      id,
      app_id: a.appId,
      event_type: 'poison.probe',
      payload: {},
      edges: [{ edge_type: 'x', target_node_type: 'file' as const, target_node_id: target }],
      attachments: [],
    });
    // An edge target that is not a uuid passes the job schema but not the column type.
    await Promise.all([
      ...good.map((id) => enqueue(s.deps.queues, 'ledger', { event: event(id, randomUUID()) })),
      enqueue(s.deps.queues, 'ledger', { event: event(bad, 'not-a-uuid') }),
    ]);
    const committed = await until(async () => {
      const rows = await s.deps.sql<{ id: string }[]>`SELECT id FROM events WHERE id = ANY(${[...good, bad]}::uuid[])`;
      return rows.length >= good.length ? rows : undefined;
    }, 'the good events');
    expect(committed.map((r) => r.id).sort()).toEqual([...good].sort());
    // …on their first attempt: no failure was ever recorded against them.
    for (const id of good) expect((await queueFor(s.deps.queues, 'ledger').getJob(`ev-${id}`))?.stacktrace ?? []).toEqual([]);
  });
});
