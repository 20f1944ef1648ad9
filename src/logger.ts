import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs. Secrets never reach a line: the redact list covers the headers and fields that
 * carry them, in requests and in anything a module chooses to log.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'req.headers["x-hub-signature-256"]',
        'req.headers["x-twilio-signature"]',
        '*.api_key',
        '*.secret',
        '*.config',
        '*.bot_token',
        '*.access_token',
        '*.auth_token',
        '*.password',
      ],
      censor: '[redacted]',
    },
  });
}
