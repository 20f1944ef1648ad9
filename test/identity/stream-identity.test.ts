import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SseClient } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { stream } from '../stream/helpers.js';
import { eventsOfType, eventually, receive, seedConnection, type Conn } from './fixtures.js';

let s: TestStack;
let app: AppCredentials;
let tg: Conn;
let wa: Conn;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'], env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  app = await s.createApp();
  tg = { appId: app.appId, id: await seedConnection(s, app.appId, 'TELEGRAM'), platform: 'TELEGRAM' };
  wa = { appId: app.appId, id: await seedConnection(s, app.appId, 'WHATSAPP'), platform: 'WHATSAPP' };
});
afterAll(() => s.close());

/** Event ids a stream delivers up to and including `last`, in order. */
async function idsUntil(c: SseClient, last: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const f = await c.next(10_000);
    if (!f) throw new Error(`stream ended before ${last}; got ${ids}`);
    const id = (JSON.parse(f.data!) as { id: string }).id;
    ids.push(id);
    if (id === last) return ids;
  }
}

describe('the event stream userId filter follows identity across a merge', () => {
  it('streams on the target, on the source (opened before), on the source with a type filter, and on the merged-away id', async () => {
    // A marker so every stream resumes from the same point and sees the whole story.
    await receive(s, tg, { from: '100', text: 'someone else' });
    const markerCursor = (await s.request('GET', '/v1/events?limit=1', { auth: app })).json.data[0].cursor;

    const tina = await receive(s, tg, { from: '101', name: 'Tina', text: 'tg before' });
    const wanda = await receive(s, wa, { from: '4915000101', name: 'Tina WA', text: 'wa before' });
    const T = tina.userId;
    const S = wanda.userId;
    const resume = { headers: { 'Last-Event-ID': markerCursor } };
    const onTarget = await stream(s.base, app, `?userId=${T}`, resume);
    const onSource = await stream(s.base, app, `?userId=${S}`, resume);
    const onSourceMessages = await stream(s.base, app, `?userId=${S}&eventTypes=message.*`, resume);
    // Before the merge each user's stream has only its own message.
    expect(await idsUntil(onTarget, tina.eventId)).toEqual([tina.eventId]);
    expect(await idsUntil(onSource, wanda.eventId)).toEqual([wanda.eventId]);
    expect(await idsUntil(onSourceMessages, wanda.eventId)).toEqual([wanda.eventId]);

    const merged = await s.request('POST', `/v1/users/${T}/merge`, { auth: app, body: { source_user_id: S } });
    expect(merged.status).toBe(200);
    const mergeEvent = merged.json.merge.event_id as string;
    await eventually(async () => (await eventsOfType(s, app.appId, 'user.merged')).length === 1, 'user.merged');
    const waAfter = await receive(s, wa, { from: '4915000101', text: 'wa after' });
    const tgAfter = await receive(s, tg, { from: '101', text: 'tg after' });
    const stranger = await receive(s, tg, { from: '100', text: 'not Tina' });
    const sentinel = await receive(s, tg, { from: '101', text: 'last' });

    // After: all three live streams follow the one person, whichever id they were opened with.
    expect(await idsUntil(onTarget, sentinel.eventId)).toEqual([mergeEvent, waAfter.eventId, tgAfter.eventId, sentinel.eventId]);
    expect(await idsUntil(onSource, sentinel.eventId)).toEqual([mergeEvent, waAfter.eventId, tgAfter.eventId, sentinel.eventId]);
    // A type filter hides the merge event, but the stream still learns of the merge from it.
    expect(await idsUntil(onSourceMessages, sentinel.eventId)).toEqual([waAfter.eventId, tgAfter.eventId, sentinel.eventId]);

    // Opened after the merge with the merged-away id: the survivor's whole history, then live.
    const late = await stream(s.base, app, `?userId=${S}`, resume);
    expect(await idsUntil(late, sentinel.eventId)).toEqual([
      tina.eventId,
      wanda.eventId,
      mergeEvent,
      waAfter.eventId,
      tgAfter.eventId,
      sentinel.eventId,
    ]);
    const more = await receive(s, wa, { from: '4915000101', text: 'live again' });
    expect(await idsUntil(late, more.eventId)).toEqual([more.eventId]);
    expect(stranger.userId).not.toBe(T);

    for (const c of [onTarget, onSource, onSourceMessages, late]) c.close();
  });
});
