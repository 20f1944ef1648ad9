import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';

export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  /** The login used, when the client authenticated. */
  user?: string;
  raw: Buffer;
  parsed: ParsedMail;
}

/** An SMTP reply to script: `code` is the SMTP reply code (4xx transient, 5xx permanent). */
export interface SmtpFailure {
  code: number;
  message: string;
  stage: 'rcpt' | 'data';
}

export interface SmtpFakeOptions {
  /** Accepted logins; when set, AUTH is required and anything else is 535. */
  users?: Record<string, string>;
}

class SmtpReply extends Error {
  constructor(
    message: string,
    readonly responseCode: number,
  ) {
    super(message);
  }
}

/** A real SMTP receiver (the smtp-server package) on 127.0.0.1 that keeps every message it accepts. */
export class SmtpFake {
  readonly received: ReceivedMail[] = [];
  /** Mailboxes that do not exist: RCPT TO answers 550. */
  readonly unknownMailboxes = new Set<string>();
  port = 0;
  private readonly scripts: (SmtpFailure & { remaining: number })[] = [];
  private readonly server: SMTPServer;
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly options: SmtpFakeOptions) {
    this.server = new SMTPServer({
      secure: false,
      disabledCommands: ['STARTTLS', ...(options.users ? [] : ['AUTH'])],
      authOptional: !options.users,
      allowInsecureAuth: true,
      logger: false,
      size: 60 * 1024 * 1024,
      onAuth: (auth, _session, cb) => {
        if (this.options.users?.[auth.username ?? ''] === auth.password) return cb(null, { user: auth.username });
        cb(new SmtpReply('5.7.8 Authentication credentials invalid', 535));
      },
      onRcptTo: (address: SMTPServerAddress, _session, cb) => {
        const scripted = this.take('rcpt');
        if (scripted) return cb(new SmtpReply(scripted.message, scripted.code));
        if (this.unknownMailboxes.has(address.address.toLowerCase()))
          return cb(new SmtpReply(`5.1.1 <${address.address}>: Recipient address rejected: User unknown`, 550));
        cb();
      },
      onData: (stream, session: SMTPServerSession, cb) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const scripted = this.take('data');
          if (scripted) return cb(new SmtpReply(scripted.message, scripted.code));
          const raw = Buffer.concat(chunks);
          simpleParser(raw)
            .then((parsed) => {
              this.received.push({
                envelope: {
                  from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                  to: session.envelope.rcptTo.map((r) => r.address),
                },
                user: session.user as string | undefined,
                raw,
                parsed,
              });
              for (const l of [...this.listeners]) l();
              cb();
            })
            .catch((e: Error) => cb(e));
        });
      },
    });
  }

  static async start(options: SmtpFakeOptions = {}): Promise<SmtpFake> {
    const fake = new SmtpFake(options);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.port = (fake.server.server.address() as AddressInfo).port;
    return fake;
  }

  /** `smtp://[user:pass@]127.0.0.1:<port>` */
  url(user?: string, pass?: string): string {
    return `smtp://${user ? `${encodeURIComponent(user)}:${encodeURIComponent(pass ?? '')}@` : ''}127.0.0.1:${this.port}`;
  }

  /** The next `n` RCPT or DATA commands are answered with this SMTP code. */
  script(n: number, failure: SmtpFailure): this {
    this.scripts.push({ ...failure, remaining: n });
    return this;
  }

  waitFor(n: number, timeoutMs = 15_000): Promise<ReceivedMail[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.received.length < n) return false;
        this.listeners.delete(check);
        clearTimeout(timer);
        resolve(this.received);
        return true;
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`smtp fake: waited ${timeoutMs} ms for ${n} messages, got ${this.received.length}`));
      }, timeoutMs);
      if (!check()) this.listeners.add(check);
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private take(stage: SmtpFailure['stage']): SmtpFailure | undefined {
    const s = this.scripts.find((x) => x.stage === stage && x.remaining > 0);
    if (!s) return undefined;
    s.remaining -= 1;
    if (s.remaining === 0) this.scripts.splice(this.scripts.indexOf(s), 1);
    return s;
  }
}
