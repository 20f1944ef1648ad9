import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { createConnectionCache } from '../../src/connections/connection-cache.js';
import { createConnection, type Connection } from '../../src/connections/connections.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import type { MessageRow } from '../../src/messages/messages.js';
import { createPartyResolver } from '../../src/messages/parties.js';
import { createSentSettler, type SettleSent } from '../../src/messages/settle.js';
import { createSubscriptionCache } from '../../src/webhooks/subscription-cache.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

/**
 * The settling statement: each accepted send becomes `sent` together with its
 * message.outbound event and its conversation's participants, one statement per application,
 * and one application's failure is only its own.
 */
let t: TestEnv;
let deps: Deps;
let settle: SettleSent;
const apps: { appId: string; conn: Connection }[] = [];
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  const connections = createConnectionCache(deps);
  const subscriptions = createSubscriptionCache(deps);
  closers.push(() => subscriptions.close());
  for (const [i, name] of ['settle-a', 'settle-b'].entries()) {
    const { appId } = await createApplication(deps.sql, name, ['events:write']);
    const made = await createConnection(deps, appId, {
      platform_name: 'TELEGRAM',
      name: `bot ${i}`,
      config: { bot_token: `7700${i}1:settle-bot_abcdef`, api_base_url: 'http://127.0.0.1:9' },
    });
    if (!made.ok) throw new Error('connection');
    apps.push({ appId, conn: (await connections.get(appId, made.value.id))! });
  }
  settle = createSentSettler(deps, { subscriptions, localFirstAttempts: undefined }, createPartyResolver(deps, connections));
});
afterAll(async () => {
  for (const close of closers) await close();
  await closeDeps(deps);
  await t.dropDatabase();
});

/** A message of `app` claimed under `claim`, as a batch job leaves it before the platform call. */
async function claimedMessage(app: { appId: string; conn: Connection }, to: string, claim: string): Promise<MessageRow> {
  const [row] = await deps.sql<MessageRow[]>`
    INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, status, attempts, claimed_by, lease_until)
    VALUES (${randomUUID()}, ${app.appId}, ${app.conn.id}, ${to}, 1, 'hello', 'sending', 1, ${claim}, now() + interval '1 minute')
    RETURNING *`;
  return row;
}

const stateOf = async (id: string) => {
  const [m] = await deps.sql<{ status: string; events: number; participants: number }[]>`
    SELECT m.status,
           (SELECT count(*)::int FROM events e WHERE e.id = m.id AND e.event_type = 'message.outbound') AS events,
           (SELECT count(*)::int FROM conversation_participants p JOIN events e ON e.conversation_id = p.conversation_id WHERE e.id = m.id) AS participants
      FROM outbound_messages m WHERE m.id = ${id}`;
  return m;
};

describe('settling accepted sends', () => {
  it('records sent, the message.outbound event and both participants at once, and only under the claim the call was made with', async () => {
    const claim = randomUUID();
    const msg = await claimedMessage(apps[0], '5101', claim);
    await expect(settle({ msg, conn: apps[0].conn, externalMessageId: 'x1', claim: randomUUID() })).resolves.toBe(false);
    expect(await stateOf(msg.id)).toEqual({ status: 'sending', events: 0, participants: 0 });
    await expect(settle({ msg, conn: apps[0].conn, externalMessageId: 'x1', claim })).resolves.toBe(true);
    expect(await stateOf(msg.id)).toEqual({ status: 'sent', events: 1, participants: 2 });
    // A repeat under the spent claim writes nothing twice.
    await expect(settle({ msg, conn: apps[0].conn, externalMessageId: 'x1', claim })).resolves.toBe(false);
    expect(await stateOf(msg.id)).toEqual({ status: 'sent', events: 1, participants: 2 });
  });

  it('fails only the sends of an application whose statement fails; the others in the same group commit are recorded', async () => {
    // A real refusal by the database, for application B's events only.
    await deps.sql.unsafe(`
      CREATE FUNCTION refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused for the test'; END $$;
      CREATE TRIGGER refuse_b BEFORE INSERT ON events FOR EACH ROW
        WHEN (NEW.app_id = '${apps[1].appId}') EXECUTE FUNCTION refuse_b();`);
    try {
      const claim = randomUUID();
      const a = await claimedMessage(apps[0], '5201', claim);
      const b = await claimedMessage(apps[1], '5202', claim);
      // Called in one turn: one group commit carries both.
      const [ra, rb] = await Promise.allSettled([
        settle({ msg: a, conn: apps[0].conn, externalMessageId: 'xa', claim }),
        settle({ msg: b, conn: apps[1].conn, externalMessageId: 'xb', claim }),
      ]);
      expect(ra).toEqual({ status: 'fulfilled', value: true });
      expect(rb.status).toBe('rejected');
      expect(await stateOf(a.id)).toEqual({ status: 'sent', events: 1, participants: 2 });
      expect(await stateOf(b.id)).toEqual({ status: 'sending', events: 0, participants: 0 });
    } finally {
      await deps.sql.unsafe('DROP TRIGGER refuse_b ON events; DROP FUNCTION refuse_b()');
    }
  });
});
