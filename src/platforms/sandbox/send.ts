import { randomUUID } from 'node:crypto';
import { platformError } from '../http-errors.js';
import { sendHalf, type OutboundMessage, type PlatformErrorCode, type SendOutcome } from '../types.js';
import { sandboxConfig, type SandboxConfig } from './config.js';

/** The connected account's own id on the sandbox: no end user may take it. */
export const SANDBOX_ACCOUNT_ID = 'sandbox';

/** End-user ids: what a reader would type (`ada`, `user-42`, `+15550100`, `ada@example.com`). */
export const SANDBOX_USER_ID = /^[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}$/;

export function sandboxUserProblem(id: string): string | undefined {
  if (!SANDBOX_USER_ID.test(id))
    return `"${id}" is not a sandbox user id: 1-128 characters of A-Z, a-z, 0-9 and . _ @ + : -, starting with a letter or digit`;
  if (id === SANDBOX_ACCOUNT_ID) return `"${SANDBOX_ACCOUNT_ID}" is the sandbox account itself, not an end user`;
  return undefined;
}

/** The platform errors a send can be made to fail with (`/fail <CODE>`). */
const SANDBOX_FAILURES = [
  'RECIPIENT_BLOCKED',
  'RECIPIENT_NOT_STARTED',
  'REPLY_WINDOW_CLOSED',
  'INVALID_RECIPIENT',
  'MESSAGE_TOO_LONG',
  'PLATFORM_REJECTED',
  'PLATFORM_AUTH_FAILED',
  'PLATFORM_RATE_LIMITED',
  'PLATFORM_UNAVAILABLE',
] as const satisfies readonly PlatformErrorCode[];

/** A text starting `/fail CODE` asks for that failure; whatever follows is the platform's message. */
const FAIL_DIRECTIVE = /^\/fail\s+(\S+)\s*([\s\S]*)$/;

/** The failure a text asks for, or undefined for an ordinary message. */
function requestedFailure(text: string): SendOutcome | undefined {
  const m = FAIL_DIRECTIVE.exec(text.trim());
  if (!m) return undefined;
  const code = m[1].toUpperCase();
  const said = m[2].trim();
  const known = (SANDBOX_FAILURES as readonly string[]).includes(code);
  const error = known
    ? platformError(code as PlatformErrorCode, `Sandbox: ${said || `simulated ${code}`}`, {
        platformCode: code,
        platformMessage: said || `simulated ${code}`,
        // A rate limit names its wait, as real platforms do; the worker holds the connection for it.
        ...(code === 'PLATFORM_RATE_LIMITED' ? { retryAfterMs: 1000 } : {}),
      })
    : platformError('PLATFORM_REJECTED', `Sandbox: unknown failure "${m[1]}"; one of ${SANDBOX_FAILURES.join(', ')}`, {
        platformCode: 'UNKNOWN_FAILURE',
        platformMessage: m[1],
      });
  return { ok: false, error };
}

/**
 * The sandbox accepts every send at once under a fresh message id, except a text starting
 * `/fail CODE`, which it refuses with that platform error (so failure handling can be tried
 * without a real platform). Nothing leaves the process.
 */
async function send(_config: SandboxConfig, m: OutboundMessage): Promise<SendOutcome> {
  return requestedFailure(m.text) ?? { ok: true, externalMessageId: `sbx-${randomUUID()}` };
}

export const sandboxSend = sendHalf<SandboxConfig>({
  configSchema: sandboxConfig,
  secretFields: [],
  maxTextLength: 4096,
  acceptsFiles: true,
  checkRecipient: sandboxUserProblem,
  send,
});
