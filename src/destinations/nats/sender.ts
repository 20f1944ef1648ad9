import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import {
  AuthorizationError,
  connect,
  credsAuthenticator,
  headers as natsHeaders,
  InvalidSubjectError,
  nkeyAuthenticator,
  NoRespondersError,
  PermissionViolationError,
  TimeoutError,
  UserAuthenticationExpiredError,
  type NatsConnection,
  type NodeConnectionOptions,
} from '@nats-io/transport-node';
import { isIP } from 'node:net';
import { withDeadline } from '../../availability.js';
import { judgeUrl, resolvePublic } from '../../net/outbound-policy.js';
import { fillTemplate } from '../template.js';
import type { DestinationSender, OpenDestination, SenderOptions } from '../types.js';
import { natsConfig, natsSecret } from './config.js';
import { describeBrokerError, sendResult } from '../result.js';
import { trustedCa } from '../tls.js';

/** A connection unused this long is closed; the next delivery opens a new one. */
const IDLE_MS = 60_000;

/** A failure retrying cannot mend, with the reason the delivery log shows. */
class PermanentError extends Error {}

/** Whether an error is in a chain (the JetStream client wraps the core client's errors as `cause`). */
const chainHas = (err: unknown, test: (e: unknown) => boolean): boolean => {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) if (test(e)) return true;
  return false;
};

/**
 * What one failed publish or connect means. A subject no stream captures (the server answers
 * "no responders", status 503), a permission or authentication refused, a subject the client
 * cannot publish to: the destination, not the moment, so the delivery fails now. Anything else
 * (a timeout, a refused socket, a connection lost, a stream over its limits) is worth retrying.
 */
function classify(err: unknown, subject: string, timeoutMs: number): { error: string; permanent: boolean } {
  if (err instanceof PermanentError) return { error: err.message, permanent: true };
  if (chainHas(err, (e) => e instanceof NoRespondersError || /no responders|jetstream is not enabled/i.test(String((e as Error)?.message))))
    return { error: `no JetStream stream captures subject "${subject}" (no responders, 503)`, permanent: true };
  if (chainHas(err, (e) => e instanceof PermissionViolationError))
    return { error: `permission denied: ${(err as Error).message}`, permanent: true };
  if (chainHas(err, (e) => e instanceof AuthorizationError || e instanceof UserAuthenticationExpiredError))
    return { error: `authentication refused: ${(err as Error).message}`, permanent: true };
  if (chainHas(err, (e) => e instanceof InvalidSubjectError)) return { error: `invalid subject "${subject}"`, permanent: true };
  if (chainHas(err, (e) => e instanceof TimeoutError)) return { error: `no JetStream ack within ${timeoutMs} ms`, permanent: false };
  return { error: describeBrokerError(err), permanent: false };
}

/** One destination's connection, shared by all its deliveries. */
interface Link {
  ready: Promise<JetStreamClient>;
  nc?: NatsConnection;
  lastUsed: number;
  pending: number;
  /** Set once retired: closes the connection when its last publish in flight settles. */
  onIdle?: () => void;
}

/**
 * Publishes deliveries to NATS JetStream: one connection per destination, every message with
 * `Nats-Msg-Id` = the delivery id (the stream's duplicate window drops a publish retried after
 * a lost ack), counted delivered only on the stream's ack.
 */
export function createNatsSender(options: SenderOptions): DestinationSender {
  const { policy, timeoutMs } = options;
  const ca = trustedCa(options.extraCa);
  const links = new Map<string, Link>();

  const drop = (key: string, link: Link) => {
    if (links.get(key) === link) links.delete(key);
    link.nc?.close().catch(() => {});
  };

  /** Tries each server in order until one answers, all within one `timeoutMs`. */
  async function open(key: string, link: Link, secret: string): Promise<JetStreamClient> {
    const { servers, credentials } = natsSecret.parse(JSON.parse(secret));
    const auth: Partial<NodeConnectionOptions> =
      credentials?.type === 'user_password'
        ? { user: credentials.user, pass: credentials.password }
        : credentials?.type === 'token'
          ? { token: credentials.token }
          : credentials?.type === 'nkey'
            ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(credentials.seed)) }
            : credentials?.type === 'creds'
              ? { authenticator: credsAuthenticator(new TextEncoder().encode(credentials.creds)) }
              : {};
    const deadline = Date.now() + timeoutMs;
    let failure: unknown = new Error('no server to connect to');
    for (const raw of servers) {
      // Judged again before every connect: the policy may have tightened since the URL was stored.
      const judged = judgeUrl(raw, 'nats', policy);
      if (!judged.ok) throw new PermanentError(`refused by the outbound address policy: ${judged.reason}`);
      const { url, host } = judged;
      let address = host;
      if (policy === 'public-https') {
        // The socket goes to the address judged, never to the name (DNS rebinding).
        const r = await resolvePublic(host, Math.max(1, deadline - Date.now()));
        if (r.kind === 'refused') throw new PermanentError(`refused by the outbound address policy: ${r.reason}`);
        if (r.kind === 'failed') {
          failure = r.error;
          continue;
        }
        address = r.addresses[0].address;
      }
      const left = deadline - Date.now();
      if (left <= 0) break;
      // `tls://` requires TLS, verified against the host name written, never the address: the
      // transport hands these options to node:tls as they are, so `servername` (untyped there) counts.
      const tls: (NonNullable<NodeConnectionOptions['tls']> & { servername?: string }) | undefined =
        url.protocol === 'tls:' ? { ...(isIP(host) ? {} : { servername: host }), ...(ca ? { ca } : {}) } : undefined;
      const connecting = connect({
        servers: `${address.includes(':') ? `[${address}]` : address}:${url.port || 4222}`,
        name: 'gateway-destination',
        timeout: left,
        // One server, the one judged: no reconnect elsewhere, no servers a cluster gossips.
        reconnect: false,
        ignoreClusterUpdates: true,
        resolve: false,
        noRandomize: true,
        ...(tls ? { tls } : {}),
        ...auth,
      });
      // A connect that answers after its deadline (or after the sender closed) is closed, not leaked.
      let late = false;
      connecting.then(
        (nc) => (late || links.get(key) !== link ? nc.close().catch(() => {}) : undefined),
        () => {},
      );
      try {
        const nc = await withDeadline(connecting, left, () => new Error(`no connection within ${timeoutMs} ms`));
        link.nc = nc;
        nc.closed().then(() => drop(key, link));
        return jetstream(nc, { timeout: timeoutMs });
      } catch (err) {
        late = true;
        if (classify(err, '', timeoutMs).permanent) throw err;
        failure = err;
      }
    }
    throw failure;
  }

  const linkFor = (dest: OpenDestination): Link => {
    const key = `${dest.subscriptionId}\n${dest.secret}`;
    let link = links.get(key);
    if (!link) {
      const fresh: Link = { ready: undefined as never, lastUsed: Date.now(), pending: 0 };
      fresh.ready = open(key, fresh, dest.secret);
      // A failed connect is forgotten at once, so the next attempt connects afresh.
      fresh.ready.catch(() => drop(key, fresh));
      links.set(key, fresh);
      link = fresh;
    }
    link.lastUsed = Date.now();
    return link;
  };

  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const [key, link] of links) if (link.pending === 0 && now - link.lastUsed > IDLE_MS) drop(key, link);
  }, IDLE_MS / 4);
  sweeper.unref();

  return {
    async send(dest, msg) {
      const started = performance.now();
      const config = natsConfig.parse(dest.config);
      const subject = fillTemplate(config.subject, msg);
      const requestHeaders = { 'content-type': 'application/json', ...msg.headers, 'Nats-Msg-Id': msg.deliveryId };
      const done = sendResult(requestHeaders, started);
      const link = linkFor(dest);
      link.pending++;
      try {
        const js = await link.ready;
        const h = natsHeaders();
        for (const [k, v] of Object.entries(msg.headers)) h.set(k, v);
        h.set('content-type', 'application/json');
        await js.publish(subject, msg.body, { msgID: msg.deliveryId, headers: h, timeout: timeoutMs });
        return done({ delivered: true });
      } catch (err) {
        return done({ delivered: false, ...classify(err, subject, timeoutMs) });
      } finally {
        link.pending--;
        link.lastUsed = Date.now();
        if (link.pending === 0) link.onIdle?.();
      }
    },
    retire(subscriptionId, keep) {
      const kept = keep && `${keep.subscriptionId}\n${keep.secret}`;
      for (const [key, link] of links) {
        if (!key.startsWith(`${subscriptionId}\n`) || key === kept) continue;
        // Out of the pool at once (no new publish on it), closed once its acks are in.
        links.delete(key);
        const shut = () =>
          void link.ready
            .then(
              () => link.nc?.close(),
              () => {},
            )
            .catch(() => {});
        if (link.pending === 0) shut();
        else link.onIdle = shut;
      }
    },
    async close() {
      clearInterval(sweeper);
      const all = [...links.values()];
      links.clear();
      await Promise.allSettled(all.map((link) => link.nc?.close()));
    },
  };
}
