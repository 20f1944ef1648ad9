import { connect, type ChannelModel, type ConfirmChannel, type ConsumeMessage } from 'amqplib';
import { isIP } from 'node:net';
import { withDeadline } from '../../availability.js';
import { judgeUrl, resolvePublic } from '../../net/outbound-policy.js';
import type { DestinationSender, OpenDestination, SendResult, SenderOptions } from '../types.js';
import { rabbitmqConfig, routingKey } from './config.js';
import { describeBrokerError, sendResult } from '../result.js';
import { trustedCa } from '../tls.js';

/** A connection unused this long is closed; the next delivery opens a new one. */
const IDLE_MS = 60_000;

/** A failure retrying cannot mend (refused by policy, bad credentials, no such exchange or vhost). */
class PermanentError extends Error {}

/**
 * AMQP reply codes that describe the destination, not the moment: 403 access refused, 404 no
 * such exchange, 406 precondition failed, 530 not allowed (an unknown vhost). Anything else (a
 * refused socket, a timeout, a broker shutting down: 320) is worth another attempt.
 */
const PERMANENT_CODES = new Set([403, 404, 406, 530]);

const isPermanent = (err: unknown) =>
  err instanceof PermanentError ||
  PERMANENT_CODES.has(Number((err as { code?: unknown })?.code)) ||
  /\b(403|404|406|530)\b|ACCESS[-_]REFUSED|NOT_ALLOWED/.test(String((err as Error)?.message));

/** One destination's connection and confirm channel, shared by all its deliveries. */
interface Link {
  ready: Promise<ConfirmChannel>;
  conn?: ChannelModel;
  lastUsed: number;
  /** Publishes awaiting their confirm, settled with the error should the channel close first. */
  pending: Set<(err: Error) => void>;
  /** Message ids the broker returned as unroutable; their confirm follows the return. */
  returned: Map<string, string>;
  /** The broker's error that closed the channel or connection (it names the exchange or vhost). */
  failure?: Error;
  /** Set once retired: called when its last publish in flight settles. */
  onIdle?: () => void;
}

/**
 * Publishes deliveries to RabbitMQ: one connection and confirm channel per destination, every
 * message persistent and `mandatory`, and a send counts as delivered only on the broker's
 * confirm. A message returned as unroutable is a permanent failure (no queue would ever get it).
 */
export function createRabbitmqSender(options: SenderOptions): DestinationSender {
  const { policy, timeoutMs } = options;
  const ca = trustedCa(options.extraCa);
  const links = new Map<string, Link>();

  /** Closes cleanly within the deadline, else drops the socket: a hung broker never answers the close. */
  const shut = (conn: ChannelModel) =>
    withDeadline(conn.close(), timeoutMs, () => new Error('no close-ok')).catch(() =>
      (conn as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.(),
    );

  const drop = (key: string, link: Link, err: Error) => {
    if (links.get(key) === link) links.delete(key);
    for (const settle of [...link.pending]) settle(err);
    if (link.conn) void shut(link.conn);
  };

  async function open(key: string, link: Link, rawUrl: string): Promise<ConfirmChannel> {
    // Judged again before every connect: the policy may have tightened since the URL was stored.
    const judged = judgeUrl(rawUrl, 'amqp', policy);
    if (!judged.ok) throw new PermanentError(`refused by the outbound address policy: ${judged.reason}`);
    const { url, host } = judged;
    let address = host;
    if (policy === 'public-https') {
      // The socket goes to the address judged, never to the name (DNS rebinding).
      const r = await resolvePublic(host, timeoutMs);
      if (r.kind === 'refused') throw new PermanentError(`refused by the outbound address policy: ${r.reason}`);
      if (r.kind === 'failed') throw r.error;
      address = r.addresses[0].address;
    }
    const tls = url.protocol === 'amqps:';
    const vhost = url.pathname === '' || url.pathname === '/' ? '/' : decodeURIComponent(url.pathname.slice(1));
    const connecting = connect(
      {
        protocol: tls ? 'amqps' : 'amqp',
        hostname: address,
        port: Number(url.port) || (tls ? 5671 : 5672),
        username: url.username ? decodeURIComponent(url.username) : 'guest',
        password: url.password ? decodeURIComponent(url.password) : 'guest',
        vhost,
        heartbeat: 30,
      },
      { timeout: timeoutMs, ...(tls ? { ...(isIP(host) ? {} : { servername: host }), ...(ca ? { ca } : {}) } : {}) },
    );
    // A connect that answers after its deadline is closed, not leaked.
    connecting.then(
      (c) => (links.get(key) === link ? undefined : shut(c)),
      () => {},
    );
    const conn = await withDeadline(connecting, timeoutMs, () => new Error(`no connection within ${timeoutMs} ms`));
    link.conn = conn;
    conn.on('error', (err: Error) => (link.failure ??= err));
    conn.on('close', (err?: Error) => drop(key, link, link.failure ?? err ?? new Error('connection closed by the broker')));
    const ch = await withDeadline(conn.createConfirmChannel(), timeoutMs, () => new Error(`no channel within ${timeoutMs} ms`));
    ch.on('error', (err: Error) => (link.failure ??= err));
    ch.on('close', () => drop(key, link, link.failure ?? new Error('channel closed')));
    ch.on('return', (m: ConsumeMessage) => {
      if (m.properties.messageId) link.returned.set(String(m.properties.messageId), m.fields.exchange);
    });
    return ch;
  }

  const keyOf = (dest: OpenDestination) => `${dest.subscriptionId}\n${dest.secret}`;

  const linkFor = (dest: OpenDestination): { key: string; link: Link } => {
    const key = keyOf(dest);
    let link = links.get(key);
    if (!link) {
      const fresh: Link = { ready: undefined as never, lastUsed: Date.now(), pending: new Set(), returned: new Map() };
      fresh.ready = open(key, fresh, dest.secret);
      // A failed connect is forgotten at once, so the next attempt connects afresh.
      fresh.ready.catch((err: Error) => drop(key, fresh, err));
      links.set(key, fresh);
      link = fresh;
    }
    link.lastUsed = Date.now();
    return { key, link };
  };

  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const [key, link] of links) if (link.pending.size === 0 && now - link.lastUsed > IDLE_MS) drop(key, link, new Error('idle'));
  }, IDLE_MS / 4);
  sweeper.unref();

  return {
    async send(dest, msg) {
      const started = performance.now();
      const config = rabbitmqConfig.parse(dest.config);
      const key = routingKey(config.routing_key, msg);
      const requestHeaders = { 'content-type': 'application/json', ...msg.headers };
      const done = sendResult(requestHeaders, started);
      const { link } = linkFor(dest);
      let ch: ConfirmChannel;
      try {
        ch = await link.ready;
      } catch (err) {
        return done({ delivered: false, error: describeBrokerError(err), permanent: isPermanent(err) });
      }
      return new Promise<SendResult>((resolve) => {
        let settled = false;
        const settle = (r: Parameters<typeof done>[0]) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          link.pending.delete(onClose);
          link.lastUsed = Date.now();
          if (link.pending.size === 0) link.onIdle?.();
          resolve(done(r));
        };
        const onClose = (err: Error) => settle({ delivered: false, error: describeBrokerError(err), permanent: isPermanent(err) });
        const timer = setTimeout(() => settle({ delivered: false, error: `no confirm within ${timeoutMs} ms` }), timeoutMs);
        link.pending.add(onClose);
        try {
          ch.publish(
            config.exchange,
            key,
            Buffer.from(msg.body),
            {
              persistent: true,
              mandatory: true,
              contentType: 'application/json',
              messageId: msg.deliveryId,
              type: msg.eventType,
              timestamp: Math.floor(Date.now() / 1000),
              headers: msg.headers,
            },
            (err: unknown) => {
              if (err)
                return link.failure ? onClose(link.failure) : settle({ delivered: false, error: 'broker refused the message (nack)' });
              if (link.returned.delete(msg.deliveryId))
                return settle({
                  delivered: false,
                  permanent: true,
                  error: `unroutable: no queue is bound to exchange "${config.exchange}" for routing key "${key}" (published mandatory)`,
                });
              settle({ delivered: true });
            },
          );
        } catch (err) {
          // The channel closed between the connect and this publish.
          onClose(err as Error);
        }
      });
    },
    retire(subscriptionId, keep) {
      const kept = keep && keyOf(keep);
      for (const [key, link] of links) {
        if (!key.startsWith(`${subscriptionId}\n`) || key === kept) continue;
        // Out of the pool at once (no new publish on it), closed once its confirms are in.
        links.delete(key);
        const shutWhenReady = () =>
          void link.ready.then(
            () => link.conn && shut(link.conn),
            () => {},
          );
        if (link.pending.size === 0) shutWhenReady();
        else link.onIdle = shutWhenReady;
      }
    },
    async close() {
      clearInterval(sweeper);
      const all = [...links.entries()];
      links.clear();
      await Promise.allSettled(all.map(([, link]) => link.conn && shut(link.conn)));
    },
  };
}
