/**
 * The outside world of the chaos harness, on loopback: a Telegram Bot API fake the send
 * worker talks to (it can answer 500 or 429 in bursts), and webhook receivers that verify
 * every delivery's signature (they can go down and come back).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function listen(server: Server, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

async function close(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}

// ---------------------------------------------------------------- Telegram

export interface TelegramFake {
  base: string;
  /** Texts received by sendMessage that the fake accepted (200), with how many times each. */
  accepted: Map<string, number>;
  /** Answers by status. */
  answers: Record<string, number>;
  /** Answers every sendMessage with `status` (500, or 429 with retry_after) for `ms`. */
  burst(status: 500 | 429, ms: number): void;
  /**
   * Reads every sendMessage for `ms` and never answers it (the connection stays open until the
   * caller gives up): a platform that may or may not have delivered. `heard` counts the texts.
   */
  silence(ms: number): void;
  /** Texts received while silent, with how many times each. */
  heard: Map<string, number>;
  /** Called once a send is accepted, before the answer goes out (a test can break something there). */
  onAccept?: (text: string) => Promise<void> | void;
  stop(): Promise<void>;
}

/**
 * sendMessage as the Bot API answers it (the platform's API reference): `{ok: true, result: {message_id}}`;
 * during a burst `{ok: false, error_code: 500}` or `{ok: false, error_code: 429,
 * parameters: {retry_after: 1}}`. A text accepted twice is a doubled send.
 */
export async function startTelegramFake(): Promise<TelegramFake> {
  const accepted = new Map<string, number>();
  const answers: Record<string, number> = {};
  const heard = new Map<string, number>();
  let failing: { status: 500 | 429; until: number } | undefined;
  let silentUntil = 0;
  let nextId = 1;
  const server = createServer(async (req, res) => {
    const raw = await readBody(req);
    const reply = (status: number, body: unknown) => {
      answers[status] = (answers[status] ?? 0) + 1;
      res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    };
    if (!/^\/bot\d+:[A-Za-z0-9_-]+\/sendMessage$/.test(req.url ?? ''))
      return reply(404, { ok: false, error_code: 404, description: 'Not Found' });
    if (failing && Date.now() < failing.until) {
      return failing.status === 429
        ? reply(429, { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } })
        : reply(500, { ok: false, error_code: 500, description: 'Internal Server Error' });
    }
    let text: string;
    try {
      text = String((JSON.parse(raw) as { text?: unknown }).text);
    } catch {
      return reply(400, { ok: false, error_code: 400, description: 'Bad Request: body is not JSON' });
    }
    if (Date.now() < silentUntil) {
      heard.set(text, (heard.get(text) ?? 0) + 1);
      return; // no answer: the caller times out
    }
    accepted.set(text, (accepted.get(text) ?? 0) + 1);
    await fake.onAccept?.(text);
    reply(200, { ok: true, result: { message_id: nextId++, date: Math.floor(Date.now() / 1000), text } });
  });
  const port = await listen(server);
  const fake: TelegramFake = {
    base: `http://127.0.0.1:${port}`,
    accepted,
    answers,
    burst(status, ms) {
      failing = { status, until: Date.now() + ms };
    },
    heard,
    silence(ms) {
      silentUntil = Date.now() + ms;
    },
    stop: () => close(server),
  };
  return fake;
}

// ---------------------------------------------------------------- webhook receivers

export interface WebhookReceiver {
  url: string;
  /** Deliveries with a valid signature, by event id, with how many times each arrived. */
  byEvent: Map<string, number>;
  /** Deliveries whose signature or timestamp did not verify. */
  badSignatures: number;
  /** Stops listening (connections refused) until `up`. */
  down(): Promise<void>;
  up(): Promise<void>;
  stop(): Promise<void>;
}

/** Verifies X-Service-Signature (HMAC-SHA256 of `<timestamp>.<body>`) and the 300 s tolerance. */
function verifyDelivery(secret: string, headers: IncomingMessage['headers'], body: string, now = Date.now()): boolean {
  const timestamp = Number(headers['x-service-timestamp']);
  const given = String(headers['x-service-signature'] ?? '').split(' ');
  if (!Number.isInteger(timestamp) || Math.abs(now / 1000 - timestamp) > 300) return false;
  const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`);
  return given.some((g) => g.length === want.length && timingSafeEqual(Buffer.from(g), want));
}

export async function startWebhookReceiver(secret: string): Promise<WebhookReceiver> {
  const byEvent = new Map<string, number>();
  let bad = 0;
  const handler = async (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const body = await readBody(req);
    if (!verifyDelivery(secret, req.headers, body)) {
      bad++;
      return res.writeHead(401).end();
    }
    const eventId = String((JSON.parse(body) as { event_id?: unknown }).event_id);
    byEvent.set(eventId, (byEvent.get(eventId) ?? 0) + 1);
    res.writeHead(200).end();
  };
  let server = createServer(handler);
  const port = await listen(server);
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}/hook`,
    byEvent,
    get badSignatures() {
      return bad;
    },
    async down() {
      if (server.listening) await close(server);
    },
    async up() {
      if (server.listening) return;
      server = createServer(handler);
      await listen(server, port);
    },
    stop: () => receiver.down(),
  };
  return receiver;
}
