import { randomBytes } from 'node:crypto';
import { PlatformFake, RateLimit, type FakeReply, type RecordedRequest } from './fake-server.js';

/**
 * Telegram's documented limits: ~30 msg/s per bot overall, ~1 msg/s per chat with bursts allowed. Modelled as
 * GCRA: a sender that keeps above 30/s (or 1/s to one chat) is refused within a few hundred
 * milliseconds, while arrivals bunched by scheduling jitter (up to ~10 messages' worth, a
 * third of a second, per bot) are not mistaken for a faster sender.
 */
const TELEGRAM_LIMITS = {
  perBot: { rate: 30, perMs: 1000, burst: 10 },
  perChat: { rate: 1, perMs: 1000, burst: 3 },
};

type Limit = { rate: number; perMs: number; burst: number };

export interface TelegramFakeOptions {
  /** Enforce the documented limits, answering 429 with `retry_after` (true = TELEGRAM_LIMITS). */
  limits?: boolean | { perBot?: Limit; perChat?: Limit };
  /** false for long benchmarks: only `counts` are kept, not the requests. @default true */
  keepRequests?: boolean;
}

const SEND_METHODS = new Set(['sendMessage', 'sendPhoto', 'sendDocument', 'sendAudio', 'sendVoice', 'sendVideo']);
const FILE_FIELD: Record<string, string> = {
  sendPhoto: 'photo',
  sendDocument: 'document',
  sendAudio: 'audio',
  sendVoice: 'voice',
  sendVideo: 'video',
};

const error = (status: number, description: string, parameters?: Record<string, unknown>): FakeReply => ({
  status,
  body: { ok: false, error_code: status, description, ...(parameters ? { parameters } : {}) },
});

/**
 * The Telegram Bot API as its API reference documents it: send methods (JSON, form or multipart),
 * getFile and file downloads; errors 401 (bad token), 403 (blocked / never started), 400
 * (chat not found, too long) and 429 with `retry_after` when the limits are enforced.
 */
export class TelegramFake extends PlatformFake {
  /** Tokens the fake refuses with 401 (every other well-formed token is a bot). */
  readonly revokedTokens = new Set<string>();
  /** Chats whose user blocked the bot. */
  readonly blockedChats = new Set<string>();
  /** Chats whose user never started the bot. */
  readonly notStartedChats = new Set<string>();
  /** Chats that do not exist. */
  readonly unknownChats = new Set<string>();
  /** 429s the fake had to answer because a documented limit was exceeded (scripted ones excluded). */
  limitHits = 0;
  /** Files getFile can serve: file_id → bytes. */
  readonly files = new Map<string, { path: string; data: Buffer; mimeType: string }>();
  private readonly nextId = new Map<string, number>();
  private readonly perBot?: RateLimit;
  private readonly perChat?: RateLimit;

  private constructor(options: TelegramFakeOptions) {
    // Long benchmarks keep counts only: every request kept would grow without bound.
    super({ keepRequests: options.keepRequests !== false });
    const limits = options.limits === true ? TELEGRAM_LIMITS : options.limits || undefined;
    if (limits?.perBot) this.perBot = new RateLimit(limits.perBot.rate, limits.perBot.perMs, limits.perBot.burst);
    if (limits?.perChat) this.perChat = new RateLimit(limits.perChat.rate, limits.perChat.perMs, limits.perChat.burst);
    this.keep = options.keepRequests !== false;
  }

  private readonly keep: boolean;

  static async start(options: TelegramFakeOptions = {}): Promise<TelegramFake> {
    return PlatformFake.listening(new TelegramFake(options));
  }

  /** Accepted sends and when the first and last arrived (ms, performance clock), kept even without requests. */
  readonly counts = { accepted: 0, firstAt: null as number | null, lastAt: null as number | null };

  /** The parameters of a request, whatever encoding it came in. */
  static params(r: RecordedRequest): Record<string, string> {
    if (r.json) return Object.fromEntries(Object.entries(r.json).map(([k, v]) => [k, String(v)]));
    return { ...r.query, ...(r.form ?? {}) };
  }

  /** Registers a file for getFile/download; returns its file_id. */
  addFile(data: Buffer, mimeType: string, path = `documents/file_${randomBytes(3).toString('hex')}`): string {
    const id = `AgAC${randomBytes(12).toString('base64url')}`;
    this.files.set(id, { path, data, mimeType });
    return id;
  }

  /** Forgets recorded requests, accepted sends and pending scripts (behaviour settings stay). */
  override reset(): void {
    super.reset();
    Object.assign(this.counts, { accepted: 0, firstAt: null, lastAt: null });
  }

  protected handle(r: RecordedRequest): FakeReply {
    const download = r.path.match(/^\/file\/bot([^/]+)\/(.+)$/);
    if (download) {
      const file = [...this.files.values()].find((f) => f.path === download[2]);
      return file && !this.revokedTokens.has(download[1])
        ? { status: 200, body: file.data, headers: { 'content-type': 'application/octet-stream' } }
        : { status: 404, body: 'Not Found' };
    }
    const m = r.path.match(/^\/bot([^/]+)\/([A-Za-z]+)$/);
    if (!m) return error(404, 'Not Found');
    const [, token, method] = m;
    if (!/^\d+:[A-Za-z0-9_-]+$/.test(token)) return error(404, 'Not Found');
    if (this.revokedTokens.has(token)) return error(401, 'Unauthorized');
    const p = TelegramFake.params(r);
    const botId = Number(token.split(':')[0]);

    if (method === 'getMe')
      return { status: 200, body: { ok: true, result: { id: botId, is_bot: true, first_name: 'Fake bot', username: 'fake_bot' } } };
    if (method === 'getFile') {
      const file = this.files.get(p.file_id);
      if (!file) return error(400, 'Bad Request: invalid file_id');
      return {
        status: 200,
        body: {
          ok: true,
          result: { file_id: p.file_id, file_unique_id: p.file_id.slice(0, 8), file_size: file.data.length, file_path: file.path },
        },
      };
    }
    if (method === 'setWebhook') return { status: 200, body: { ok: true, result: true, description: 'Webhook was set' } };
    if (!SEND_METHODS.has(method)) return error(404, 'Not Found');

    const chatId = p.chat_id;
    if (!chatId) return error(400, 'Bad Request: chat_id is empty');
    if (method === 'sendMessage') {
      if (!p.text) return error(400, 'Bad Request: message text is empty');
      if ([...p.text].length > 4096) return error(400, 'Bad Request: message is too long');
      if (p.parse_mode && !['MarkdownV2', 'HTML', 'Markdown'].includes(p.parse_mode))
        return error(400, `Bad Request: unsupported parse_mode`);
    } else {
      const field = FILE_FIELD[method];
      if (!r.files?.some((f) => f.field === field) && !p[field]) return error(400, `Bad Request: there is no ${field} in the request`);
      if (p.caption && [...p.caption].length > 1024) return error(400, 'Bad Request: message caption is too long');
    }
    if (this.unknownChats.has(chatId)) return error(400, 'Bad Request: chat not found');
    if (this.blockedChats.has(chatId)) return error(403, 'Forbidden: bot was blocked by the user');
    if (this.notStartedChats.has(chatId)) return error(403, "Forbidden: bot can't initiate conversation with a user");

    const now = performance.now();
    const wait = Math.max(this.perBot?.take(`bot:${botId}`, now) ?? 0, 0);
    const chatWait = wait > 0 ? 0 : (this.perChat?.take(`chat:${botId}:${chatId}`, now) ?? 0);
    if (wait > 0 || chatWait > 0) {
      this.limitHits += 1;
      const seconds = Math.max(1, Math.ceil(Math.max(wait, chatWait) / 1000));
      return error(429, `Too Many Requests: retry after ${seconds}`, { retry_after: seconds });
    }
    if (this.keep) this.accepted.push(r);
    this.counts.accepted += 1;
    this.counts.firstAt ??= r.at;
    this.counts.lastAt = r.at;
    const id = (this.nextId.get(chatId) ?? 0) + 1;
    this.nextId.set(chatId, id);
    const chat = { id: Number(chatId), type: chatId.startsWith('-') ? 'group' : 'private' };
    const result: Record<string, unknown> = {
      message_id: id,
      from: { id: botId, is_bot: true, first_name: 'Fake bot' },
      chat,
      date: Math.floor(Date.now() / 1000),
    };
    if (method === 'sendMessage') result.text = p.text;
    else {
      if (p.caption) result.caption = p.caption;
      const f = r.files?.[0];
      result[FILE_FIELD[method]] = {
        file_id: `F${randomBytes(8).toString('hex')}`,
        file_unique_id: randomBytes(4).toString('hex'),
        file_size: f?.data.length ?? 0,
        file_name: f?.filename,
      };
    }
    return { status: 200, body: { ok: true, result } };
  }
}
