import type { Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { unavailable } from './errors.js';
import type { Redis } from './redis.js';

/**
 * How long an enqueue waits for a replica to confirm it has the job (ms). A replica in sync
 * answers within a round trip; one that has not after this is behind or gone, and the request
 * answers 503 rather than hold its client (and the connection's other commands) any longer.
 */
const REPLICA_WAIT_MS = 1_000;

/** How many replicas must have a job before its producer hears it is stored: a number, or `auto` (1 when the server has replicas). */
type Policy = number | 'auto';
const policies = new WeakMap<object, { policy: Policy; replicas?: Promise<number> }>();

/** Makes every enqueue on `connection` wait for replicas (REDIS_WAIT_REPLICAS; unset is `auto`). */
export function requireReplicas(connection: Redis, replicas: number | undefined): void {
  policies.set(connection, { policy: replicas ?? 'auto' });
}

/** Why a job that is on its master is not yet acknowledged: no replica confirmed it within REPLICA_WAIT_MS. */
class ReplicaShortfall extends Error {}

/** Whether `err` is the 503 of a job that reached its master but no replica (it may still run). */
export const isNotReplicated = (err: unknown): boolean => err instanceof Error && err.cause instanceof ReplicaShortfall;

/**
 * Resolves once `queue`'s master has copied what this connection wrote to it (the job just
 * added) to the required replicas; throws the UNAVAILABLE AppError when they have not within
 * REPLICA_WAIT_MS. Redis replicates asynchronously: without this a master killed right after
 * an add loses a job whose 202 (or inbound 200) was already answered. WAIT counts the writes
 * of the connection it is sent on, so it goes to the node connection the add went through: on
 * a cluster, the master of the queue's slot.
 */
export async function replicated(queue: Queue): Promise<void> {
  // The connection the queue was given (its `client` is BullMQ's proxy of it, another object).
  const client = queue.opts.connection as Redis;
  const entry = policies.get(client);
  if (!entry) return;
  const want = entry.policy === 'auto' ? await (entry.replicas ??= detectReplicas(client)) : entry.policy;
  if (want === 0) return;
  const node = client instanceof Cluster ? await masterOf(client, queue.qualifiedName) : client;
  const acked = Number(await node.call('WAIT', want, REPLICA_WAIT_MS));
  if (acked < want) {
    const shortfall = new ReplicaShortfall(`${acked} of ${want} Redis replicas confirmed the job within ${REPLICA_WAIT_MS} ms`);
    throw unavailable('Redis replication', shortfall);
  }
}

/** `auto`: wait for one replica when the deployment has any (a cluster's replica nodes, a single server's connected replicas). */
async function detectReplicas(client: Redis): Promise<number> {
  if (client instanceof Cluster) {
    const nodes = String(await client.call('CLUSTER', 'NODES'));
    return /^\S+ \S+ (myself,)?slave /m.test(nodes) ? 1 : 0;
  }
  return /^connected_slaves:[1-9]/m.test(await client.info('replication')) ? 1 : 0;
}

const slotOfKey = new WeakMap<Cluster, Map<string, number>>();

/** The cluster's connection to the master serving `key`'s slot (the slot asked of the cluster once per key). */
async function masterOf(cluster: Cluster, key: string): Promise<Redis> {
  let slots = slotOfKey.get(cluster);
  if (!slots) slotOfKey.set(cluster, (slots = new Map()));
  let slot = slots.get(key);
  if (slot === undefined) slots.set(key, (slot = Number(await cluster.call('CLUSTER', 'KEYSLOT', key))));
  const owner = cluster.slots[slot]?.[0];
  const node = cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node) throw unavailable('Redis', new Error(`no master known for slot ${slot}`));
  return node;
}
