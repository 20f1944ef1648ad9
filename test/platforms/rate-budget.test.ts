import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { admitSends, holdConnection, paceSend, reserveSendSlot } from '../../src/platforms/rate-budget.js';
import { createRedis } from '../../src/redis.js';
import { SHARED_REDIS_URL } from '../helpers/servers.js';

const redis = createRedis(SHARED_REDIS_URL, 'blocking');
afterAll(() => redis.quit());
const prefix = () => `t${randomBytes(5).toString('hex')}`;

describe('send budgets in Redis', () => {
  it('reserves successive slots one interval apart per connection (Telegram: 30/s, +3% margin)', async () => {
    const p = prefix();
    const waits = [];
    for (let i = 0; i < 5; i++) waits.push(await reserveSendSlot(redis, p, 'TELEGRAM', 'c1', `chat${i}`));
    // Each reservation is charged at once, so the waits grow by the interval (35 ms), less the time the calls took.
    expect(waits[0]).toBe(0);
    for (let i = 1; i < 5; i++) expect(waits[i]).toBeGreaterThanOrEqual(35 * i - 15);
    for (let i = 1; i < 5; i++) expect(waits[i]).toBeLessThanOrEqual(35 * i);
  });

  it('spaces one recipient by its own budget (Telegram: 1/s per chat) and keeps connections apart', async () => {
    const p = prefix();
    expect(await reserveSendSlot(redis, p, 'TELEGRAM', 'c1', 'chat')).toBe(0);
    const second = await reserveSendSlot(redis, p, 'TELEGRAM', 'c1', 'chat');
    expect(second).toBeGreaterThan(1000);
    expect(second).toBeLessThanOrEqual(1030);
    expect(await reserveSendSlot(redis, p, 'TELEGRAM', 'c2', 'chat')).toBe(0);
  });

  it('lets a burst through at once where the platform allows one (WhatsApp: 3 extra to one user)', async () => {
    const p = prefix();
    const waits = [];
    for (let i = 0; i < 5; i++) waits.push(await reserveSendSlot(redis, p, 'WHATSAPP', 'c1', '+1555'));
    // The first four are only spaced by the number's 80/s; the fifth waits for the pair budget (~6 s).
    expect(waits.slice(0, 4).every((w) => w < 100)).toBe(true);
    expect(waits[4]).toBeGreaterThan(5000);
  });

  it('pacing charges only when the send may go now, and says how long otherwise', async () => {
    const p = prefix();
    expect(await paceSend(redis, p, 'SMS', 'c1', '+1555')).toBe(0);
    // SMS: 1/s per number with a burst of 5 (plus pacing slack): six go at once, the seventh waits.
    for (let i = 0; i < 5; i++) expect(await paceSend(redis, p, 'SMS', 'c1', `+1556${i}`)).toBe(0);
    const wait = await paceSend(redis, p, 'SMS', 'c1', '+15570');
    expect(wait).toBeGreaterThan(900);
    // A refused call spent nothing: asking again gives (about) the same wait, not a later one.
    const again = await paceSend(redis, p, 'SMS', 'c1', '+15571');
    expect(again).toBeLessThanOrEqual(wait);
  });

  it("holds a connection after a platform's retry-after: later reservations and sends wait for it", async () => {
    const p = prefix();
    await holdConnection(redis, p, 'DISCORD', 'c1', 2000);
    const reserved = await reserveSendSlot(redis, p, 'DISCORD', 'c1', '123');
    expect(reserved).toBeGreaterThan(1900);
    expect(reserved).toBeLessThanOrEqual(2000);
    expect(await paceSend(redis, p, 'DISCORD', 'c1', '124')).toBeGreaterThan(1900);
  });

  it('admits a batch in the order given, charging the budgets as reservations one by one would', async () => {
    const p = prefix();
    const send = (recipient: string) => ({ platform: 'TELEGRAM' as const, connectionId: 'c1', recipient });
    const admitted = await admitSends(redis, p, [send('a'), send('b'), send('a')]);
    // Only the first goes at once; chat "b" waits one interval of the connection's 30/s (35 ms),
    // the second to chat "a" its 1/s per chat.
    expect(admitted.map((a) => a.paced)).toEqual([true, false, false]);
    expect(admitted[0].waitMs).toBe(0);
    expect(admitted[1].waitMs).toBeGreaterThan(0);
    expect(admitted[1].waitMs).toBeLessThanOrEqual(35);
    expect(admitted[2].waitMs).toBeGreaterThan(950);
    expect(admitted[2].waitMs).toBeLessThanOrEqual(1030);
    // The connection was charged up to the last slot handed out.
    expect(await reserveSendSlot(redis, p, 'TELEGRAM', 'c1', 'c')).toBeGreaterThan(admitted[2].waitMs);
  });

  it('admits a batch again after Redis forgot its scripts', async () => {
    const p = prefix();
    const send = { platform: 'TELEGRAM' as const, connectionId: 'c1', recipient: 'x' };
    await admitSends(redis, p, [send]);
    await redis.script('FLUSH');
    const [again] = await admitSends(redis, p, [{ ...send, connectionId: 'c2' }]);
    expect(again.paced).toBe(true);
  });
});
