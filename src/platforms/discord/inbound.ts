import { createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import {
  configString,
  dedupeOf,
  header,
  isObject,
  jsonObject,
  ok,
  parseJson,
  refuse,
  replayWindow,
  str,
  typeOfMime,
} from '../inbound-common.js';
import type { DirectAnswer, InboundHalf, InboundMedia, NormalisedRecord, PlatformParty } from '../types.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObject) : []);

/** Interaction types (Discord API): PING, APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE, MODAL_SUBMIT. */
const PING = 1;
const COMMAND = 2;
const COMPONENT = 3;
const AUTOCOMPLETE = 4;
const MODAL = 5;
/** Command option type of an uploaded file. */
const ATTACHMENT_OPTION = 11;

/** Ed25519 public keys as SPKI DER: this fixed prefix, then the raw 32 bytes (the platform's API reference). */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map<string, KeyObject | null>();

function publicKey(hex: string): KeyObject | null {
  let key = keys.get(hex);
  if (key === undefined) {
    try {
      key = /^[0-9a-f]{64}$/i.test(hex)
        ? createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' })
        : null;
    } catch {
      key = null;
    }
    if (keys.size > 10_000) keys.clear();
    keys.set(hex, key);
  }
  return key;
}

/** A snowflake's creation time: the top 42 bits are milliseconds since the Discord epoch (2015). */
const snowflakeIso = (id: string) => {
  try {
    return new Date(Number(BigInt(id) >> 22n) + 1_420_070_400_000).toISOString();
  } catch {
    return new Date(0).toISOString();
  }
};

function partyOf(i: Obj): PlatformParty | undefined {
  const u = obj(obj(i.member)?.user) ?? obj(i.user);
  const id = str(u?.id);
  if (!u || !id) return undefined;
  const name = str(obj(i.member)?.nick) ?? str(u.global_name) ?? str(u.username);
  return { externalId: id, ...(name ? { name } : {}), ...(str(u.username) ? { username: str(u.username) } : {}) };
}

/** "/name sub opt:value …": the command as a user would have typed it. */
function commandText(name: string, options: Obj[]): string {
  const parts = [`/${name}`];
  const walk = (opts: Obj[]) => {
    for (const o of opts) {
      if (Array.isArray(o.options)) {
        parts.push(String(o.name));
        walk(arr(o.options));
      } else if (o.type !== ATTACHMENT_OPTION) {
        parts.push(`${String(o.name)}:${String(o.value)}`);
      }
    }
  };
  walk(options);
  return parts.join(' ');
}

function attachmentOf(data: Obj): { media: InboundMedia; mime?: string } | undefined {
  const all = (opts: Obj[]): Obj[] => opts.flatMap((o) => [o, ...all(arr(o.options))]);
  const option = all(arr(data.options)).find((o) => o.type === ATTACHMENT_OPTION);
  const a = option ? obj(obj(obj(data.resolved)?.attachments)?.[String(option.value)]) : undefined;
  const url = str(a?.url);
  if (!a || !url) return undefined;
  const mime = str(a.content_type);
  return {
    mime,
    media: {
      url,
      platformFileId: str(a.id),
      ...(mime ? { mimeType: mime } : {}),
      ...(str(a.filename) ? { filename: str(a.filename) } : {}),
      ...(typeOfMime(mime) === 'audio' ? { isAudio: true } : {}),
      ...(typeof a.duration_secs === 'number' ? { durationSec: a.duration_secs } : {}),
    },
  };
}

function interactionRecord(i: Obj): NormalisedRecord | undefined {
  const id = str(i.id);
  const channel = obj(i.channel);
  const channelId = str(i.channel_id) ?? str(channel?.id);
  const sender = partyOf(i);
  const data = obj(i.data) ?? {};
  if (!id || !channelId || !sender) return undefined;
  let message: Extract<NormalisedRecord, { kind: 'message' }>['message'];
  if (i.type === COMMAND) {
    const text = commandText(String(data.name ?? ''), arr(data.options));
    const file = attachmentOf(data);
    const extra = { interaction: 'application_command', command: str(data.name), options: data.options ?? [] };
    message = file ? { text, type: typeOfMime(file.mime), media: file.media, extra } : { text, type: 'text', extra };
  } else if (i.type === COMPONENT) {
    const values = Array.isArray(data.values) ? data.values.map(String) : [];
    message = {
      text: values.length ? values.join(', ') : String(data.custom_id ?? ''),
      type: 'text',
      extra: { interaction: 'message_component', custom_id: str(data.custom_id), values, message_id: str(obj(i.message)?.id) },
    };
  } else if (i.type === MODAL) {
    const fields = Object.fromEntries(
      arr(data.components)
        .flatMap((row) => arr(row.components))
        .map((c) => [String(c.custom_id), c.value]),
    );
    message = {
      text: Object.values(fields).map(String).join('\n'),
      type: 'text',
      extra: { interaction: 'modal_submit', custom_id: str(data.custom_id), fields },
    };
  } else {
    return undefined;
  }
  return {
    kind: 'message',
    externalMessageId: id,
    conversation: { externalId: channelId, ...(str(channel?.name) ? { name: str(channel?.name) } : {}) },
    sender,
    message,
    occurredAt: snowflakeIso(id),
  };
}

const json = (body: unknown): DirectAnswer => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });

/**
 * Discord interactions endpoint (the platform's API reference): Ed25519 over timestamp + raw body with the
 * application's public key, the timestamp within the replay window as for Slack (Discord probes with bad signatures and expects 401), PING
 * answered with PONG, interactions deduplicated on their id. Ordinary channel messages,
 * reactions and edits only reach a bot over the Gateway websocket, which this service does
 * not hold open: Discord's inbound is slash commands, components and modals.
 */
export const discordInbound: InboundHalf = {
  verify(config, req) {
    const hex = configString(config, 'public_key');
    if (!hex) return refuse('connection has no public_key');
    const key = publicKey(hex);
    if (!key) return refuse('connection public_key is not a 32-byte hex key');
    const sig = header(req, 'x-signature-ed25519');
    const ts = header(req, 'x-signature-timestamp');
    if (!sig || !ts) return refuse('missing X-Signature-Ed25519 or X-Signature-Timestamp');
    if (!/^[0-9a-f]{128}$/i.test(sig)) return refuse('invalid signature');
    // The signature covers the timestamp, so refusing stale ones stops replays of a captured interaction.
    const fresh = replayWindow(ts, req.now);
    if (!fresh.ok) return fresh;
    const valid = verifySignature(null, Buffer.concat([Buffer.from(ts), req.rawBody]), key, Buffer.from(sig, 'hex'));
    return valid ? ok : refuse('invalid signature');
  },
  handshake(_config, req) {
    if (req.method !== 'POST') return undefined;
    const body = parseJson(req.rawBody);
    return isObject(body) && body.type === PING ? json({ type: PING }) : undefined;
  },
  dedupeKey(req) {
    const body = parseJson(req.rawBody);
    const id = isObject(body) ? str(body.id) : undefined;
    return id ? dedupeOf([id]) : undefined;
  },
  /**
   * Discord wants an interaction response within 3 s. The reply comes later through the
   * API, so commands and modals get "thinking…" (5, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE),
   * components a silent deferral (6, DEFERRED_UPDATE_MESSAGE), autocomplete no choices.
   */
  acknowledge(req) {
    const body = parseJson(req.rawBody);
    const type = isObject(body) ? body.type : undefined;
    if (type === COMPONENT) return json({ type: 6 });
    if (type === AUTOCOMPLETE) return json({ type: 8, data: { choices: [] } });
    return json({ type: 5 });
  },
  normalise({ rawBody }) {
    const r = interactionRecord(jsonObject(rawBody, 'DISCORD'));
    return r ? [r] : [];
  },
};
