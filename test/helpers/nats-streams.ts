import { randomBytes } from 'node:crypto';
import { jetstreamManager, type StreamConfig } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

/** A `nats://` or `tls://` URL, with the CA to trust for the latter. */
export interface NatsServerRef {
  url: string;
  caPem?: string;
}

/** A connection of the test's own (not the gateway's) to `server`. */
function connectTo(server: NatsServerRef): Promise<NatsConnection> {
  const url = new URL(server.url);
  return connect({
    servers: `${url.hostname}:${url.port || 4222}`,
    ...(url.protocol === 'tls:' ? { tls: server.caPem ? { ca: server.caPem } : {} } : {}),
  });
}

/** Runs `fn` on a fresh connection to `server`, closed after (a server restarted since leaves no stale one). */
async function withNats<T>(server: NatsServerRef, fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await connectTo(server);
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

export interface TestStream {
  name: string;
  /** The subject prefix the stream captures (`<prefix>.>`). */
  prefix: string;
  /** Every message now in the stream, in stream order: its `Nats-Msg-Id` and body. */
  messages(): Promise<{ msgId: string; data: string }[]>;
  delete(): Promise<void>;
}

/** A file-stored stream `gwtest_<random>` capturing `gwtest.<random>.>` on `server`. */
export async function addTestStream(server: NatsServerRef, config: Partial<StreamConfig> = {}): Promise<TestStream> {
  const id = randomBytes(6).toString('hex');
  const name = `gwtest_${id}`;
  await withNats(server, async (nc) => (await jetstreamManager(nc)).streams.add({ name, subjects: [`gwtest.${id}.>`], ...config }));
  return {
    name,
    prefix: `gwtest.${id}`,
    messages: () =>
      withNats(server, async (nc) => {
        const jsm = await jetstreamManager(nc);
        const { first_seq: first, last_seq: last, messages } = (await jsm.streams.info(name)).state;
        const out: { msgId: string; data: string }[] = [];
        if (messages === 0) return out;
        for (let seq = first; seq <= last; seq++) {
          const m = await jsm.streams.getMessage(name, { seq });
          if (m) out.push({ msgId: m.header?.get('Nats-Msg-Id') ?? '', data: m.string() });
        }
        return out;
      }),
    delete: () => withNats(server, async (nc) => void (await (await jetstreamManager(nc)).streams.delete(name))),
  };
}
