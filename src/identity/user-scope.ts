import type { Sql } from '../db.js';
import { systemEventType } from '../ledger/event-types.js';
import type { EventRecord } from '../ledger/read.js';
import { resolveUserId } from './users.js';

/**
 * "Does this event involve the user?" for a long-running reader (the event stream) whose
 * filter names a user — or a platform user — and which must keep following that identity
 * while users merge under it.
 *
 * A scope starts from the id's survivor now (a merged-away id stands for the user it was
 * merged into) and that user's platform users, and widens as the reader sees `user.merged`
 * events touching it: both users of the merge, and the platform users that moved. Matching
 * is on either an edge's platform user being in the scope, or that platform user belonging
 * (as read with the event) to a user in the scope. So a stream on a user keeps receiving its
 * platform users' events after it is merged into another user, and sees the other user's
 * events from the merge on.
 */
export class UserScope {
  private constructor(
    private readonly users: Set<string>,
    private readonly platformUsers: Set<string>,
  ) {}

  /** The scope of `id` now: a user (live or merged away) or a platform user of the application. */
  static async resolve(sql: Sql, appId: string, id: string): Promise<UserScope> {
    const key = id.toLowerCase();
    const survivor = await resolveUserId(sql, appId, key);
    const pus = survivor
      ? await sql<{ id: string }[]>`SELECT id FROM platform_users WHERE app_id = ${appId} AND user_id = ${survivor}`
      : [];
    return new UserScope(new Set([key, ...(survivor ? [survivor] : [])]), new Set([key, ...pus.map((p) => p.id)]));
  }

  /** Must see every event the reader considers, in ledger order (it learns merges from them). */
  involves(event: EventRecord): boolean {
    if (event.event_type === systemEventType('user.merged')) this.learn(event.payload);
    return event.edges.some(
      (x) =>
        x.target_node_type === 'platform_user' &&
        (this.platformUsers.has(x.target_node_id) ||
          (x.platform_user?.user_id !== undefined && x.platform_user?.user_id !== null && this.users.has(x.platform_user.user_id))),
    );
  }

  private learn(payload: Record<string, unknown>): void {
    const source = typeof payload.source_user_id === 'string' ? payload.source_user_id : undefined;
    const target = typeof payload.target_user_id === 'string' ? payload.target_user_id : undefined;
    if (!source || !target || !(this.users.has(source) || this.users.has(target))) return;
    this.users.add(source).add(target);
    for (const id of Array.isArray(payload.platform_user_ids) ? payload.platform_user_ids : [])
      if (typeof id === 'string') this.platformUsers.add(id);
  }
}
