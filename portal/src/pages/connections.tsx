import { useCallback, useEffect, useState } from 'react';
import { api, errorText } from '../api.ts';
import { useEventStream } from '../live/use-event-stream.ts';
import { Badge, CopyButton, DeleteButton, ErrorNote, Field, Notice, when } from '../components/ui.tsx';
import schemas from '../generated/platform-schemas.json';
import { fieldLabel, jsPattern, type ObjectSchema } from '../schema-fields.ts';
import type { Answer, Connection } from '../types.ts';

/** Each platform's config as JSON Schema, generated at build time from the service's own zod schemas. */
const CONFIG_SCHEMAS = schemas as Record<string, ObjectSchema>;
const PLATFORMS = Object.keys(CONFIG_SCHEMAS);

export function Connections() {
  const [list, setList] = useState<Connection[]>();
  const [error, setError] = useState<string>();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<Connection>();
  const load = useCallback(
    () =>
      api<Answer<'listPlatformConnections'>>('GET', '/v1/platform-connections').then(
        (r) => setList(r.data),
        (e) => setError(errorText(e)),
      ),
    [],
  );
  useEffect(() => void load(), [load]);

  return (
    <section aria-labelledby="conn-title">
      <div className="heading">
        <h1 id="conn-title">Connections</h1>
        <button type="button" onClick={() => setCreating((c) => !c)} aria-expanded={creating}>
          New connection
        </button>
      </div>
      {creating ? (
        <CreateConnection
          onCreated={(c) => {
            setCreating(false);
            setCreated(c);
            void load();
          }}
        />
      ) : null}
      {created ? (
        <div className="secret-once" role="status">
          <strong>{created.name} is connected.</strong>
          <p>Paste this inbound webhook URL into the platform's console (for Telegram: its setWebhook call):</p>
          <code className="secret" data-testid="webhook-url">
            {created.webhook_url}
          </code>{' '}
          <CopyButton text={created.webhook_url} label="Copy URL" />
        </div>
      ) : null}
      <ErrorNote error={error} />
      {!list ? (
        <p>Loading…</p>
      ) : list.length === 0 ? (
        <p>No connections yet.</p>
      ) : (
        <ul className="deliveries">
          {list.map((c) => (
            <ConnectionCard key={c.id} connection={c} onChanged={() => void load()} />
          ))}
        </ul>
      )}
    </section>
  );
}

function ConnectionCard({ connection: c, onChanged }: { connection: Connection; onChanged: () => void }) {
  const [error, setError] = useState<string>();
  const path = `/v1/platform-connections/${encodeURIComponent(c.id)}`;
  const act = async (what: () => Promise<unknown>) => {
    setError(undefined);
    try {
      await what();
      onChanged();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const active = c.status === 'ACTIVE';
  return (
    <li className="card" data-connection-id={c.id}>
      <div className="heading">
        <h2>{c.name}</h2>
        <Badge tone="">{c.platform_name}</Badge>
        <Badge tone={c.status.toLowerCase()}>{c.status}</Badge>
        <Badge tone={c.health.status}>health: {c.health.status}</Badge>
      </div>
      <dl className="facts">
        <dt>Inbound webhook URL</dt>
        <dd>
          <code className="clip">{c.webhook_url}</code> <CopyButton text={c.webhook_url} label="Copy" />
        </dd>
        <dt>Last inbound received</dt>
        <dd>{when(c.health.last_inbound_at)}</dd>
        <dt>Last send succeeded</dt>
        <dd>{when(c.health.last_success_at)}</dd>
        <dt>Last platform error</dt>
        <dd>{c.health.last_error ? `${c.health.last_error} (${when(c.health.last_error_at)})` : 'none'}</dd>
      </dl>
      <div className="actions">
        <button type="button" className="ghost" onClick={() => act(() => api('PATCH', path, { status: active ? 'DISABLED' : 'ACTIVE' }))}>
          {active ? 'Disable' : 'Enable'}
        </button>
        <DeleteButton
          question={`Delete ${c.name}? Its message records and conversations go with it; its events stay in the ledger.`}
          onConfirmed={() => act(() => api('DELETE', path))}
        />
      </div>
      <ErrorNote error={error} />
      <details>
        <summary>Send a test message</summary>
        <TestMessage connectionId={c.id} />
      </details>
      {c.platform_name === 'SANDBOX' ? (
        <details>
          <summary>Chat as the end user</summary>
          <SandboxChat connectionId={c.id} />
        </details>
      ) : null}
    </li>
  );
}

function TestMessage({ connectionId }: { connectionId: string }) {
  const [to, setTo] = useState('');
  const [text, setText] = useState('Hello from the developer portal');
  const [result, setResult] = useState<string>();
  const [error, setError] = useState<string>();
  const id = connectionId.slice(0, 8);
  return (
    <form
      className="card inline"
      aria-label="Test message"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(undefined);
        setResult(undefined);
        try {
          const r = await api<Answer<'sendMessage', 201 | 202>>('POST', '/v1/messages', {
            platform_connection_id: connectionId,
            to_external_id: to.trim(),
            message: text,
          });
          setResult(`Message ${r.status}${r.external_message_id ? ` (platform id ${r.external_message_id})` : ''}.`);
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <Field id={`to-${id}`} label="Recipient's platform id">
        <input id={`to-${id}`} value={to} onChange={(e) => setTo(e.currentTarget.value)} required />
      </Field>
      <Field id={`text-${id}`} label="Text">
        <input id={`text-${id}`} value={text} onChange={(e) => setText(e.currentTarget.value)} required />
      </Field>
      <button type="submit">Send</button>
      <Notice text={result} />
      <ErrorNote error={error} />
    </form>
  );
}

/** A form drawn from the platform's config schema; secret fields are password inputs and never read back. */
function CreateConnection({ onCreated }: { onCreated: (c: Connection) => void }) {
  const [platform, setPlatform] = useState(PLATFORMS[0]);
  const [name, setName] = useState('');
  const [config, setConfig] = useState<Record<string, string>>({});
  const [error, setError] = useState<string>();
  const schema = CONFIG_SCHEMAS[platform];
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {});
  return (
    <form
      className="card"
      aria-label="New connection"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(undefined);
        // Inputs hold text; a field the schema types as a number goes as one.
        const values = Object.fromEntries(
          Object.entries(config)
            .filter(([k, v]) => v.trim() !== '' && schema.properties?.[k])
            .map(([k, v]) => [k, ['integer', 'number'].includes(schema.properties?.[k]?.type ?? '') ? Number(v) : v]),
        );
        try {
          onCreated(
            await api<Answer<'createPlatformConnection', 201>>('POST', '/v1/platform-connections', {
              platform_name: platform,
              name: name.trim(),
              config: values,
            }),
          );
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <Field id="conn-platform" label="Platform">
        <select
          id="conn-platform"
          value={platform}
          onChange={(e) => {
            setPlatform(e.currentTarget.value);
            setConfig({});
          }}
        >
          {PLATFORMS.map((p) => (
            <option key={p} value={p}>
              {p.charAt(0) + p.slice(1).toLowerCase()}
            </option>
          ))}
        </select>
      </Field>
      <Field id="conn-name" label="Name">
        <input id="conn-name" value={name} onChange={(e) => setName(e.currentTarget.value)} required />
      </Field>
      {fields.map(([key, p]) => (
        <Field
          key={`${platform}.${key}`}
          id={`cfg-${key}`}
          label={`${fieldLabel(key)}${required.has(key) ? '' : ' (optional)'}`}
          hint={p.writeOnly ? 'Secret: stored encrypted, never shown again' : undefined}
        >
          {p.enum ? (
            <select id={`cfg-${key}`} value={config[key] ?? ''} onChange={(e) => setConfig({ ...config, [key]: e.currentTarget.value })}>
              <option value="">—</option>
              {p.enum.map((v) => (
                <option key={v}>{v}</option>
              ))}
            </select>
          ) : (
            <input
              id={`cfg-${key}`}
              name={key}
              type={p.writeOnly ? 'password' : p.format === 'uri' ? 'url' : p.format === 'email' ? 'email' : 'text'}
              autoComplete={p.writeOnly ? 'new-password' : 'off'}
              required={required.has(key)}
              pattern={p.pattern ? jsPattern(p.pattern) : undefined}
              value={config[key] ?? ''}
              onChange={(e) => setConfig({ ...config, [key]: e.currentTarget.value })}
            />
          )}
        </Field>
      ))}
      <ErrorNote error={error} />
      <div className="actions">
        <button type="submit">Connect</button>
      </div>
    </form>
  );
}

const MESSAGE_EVENTS = { eventTypes: 'message.*', conversationId: '', userId: '' };

/**
 * A sandbox connection's conversation with one end user: type as the user (the sandbox's
 * inbound endpoint, so it goes through the real inbound pipeline) or as the app (a send), and
 * watch the ledger answer live — the user's messages, the sent ones and their statuses.
 */
function SandboxChat({ connectionId }: { connectionId: string }) {
  const [user, setUser] = useState('ada');
  const [text, setText] = useState('');
  const [error, setError] = useState<string>();
  const { rows } = useEventStream(MESSAGE_EVENTS, false);
  const id = connectionId.slice(0, 8);
  const mine = rows.filter((e) => e.platformConnectionId === connectionId);
  const party = (e: (typeof rows)[number], edge: string) => e.edges.find((x) => x.edgeType === edge)?.targetPlatformUser?.externalId;
  const status = new Map<string, string>();
  for (const e of [...mine].reverse())
    if (e.eventType === 'message.status' && e.originEventId) status.set(e.originEventId, String(e.payload.status));
  const lines = mine
    .filter((e) =>
      e.eventType === 'message.inbound' ? party(e, 'sent_by') === user : e.eventType === 'message.outbound' && party(e, 'sent_to') === user,
    )
    .reverse();
  const say = async (as: 'user' | 'app') => {
    setError(undefined);
    try {
      if (as === 'user')
        await api('POST', `/v1/platform-connections/${encodeURIComponent(connectionId)}/sandbox/messages`, { from: user.trim(), text });
      else await api('POST', '/v1/messages', { platform_connection_id: connectionId, to_external_id: user.trim(), message: text });
      setText('');
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form
      className="card inline"
      aria-label="Sandbox chat"
      onSubmit={(e) => {
        e.preventDefault();
        void say('user');
      }}
    >
      <Field id={`chat-user-${id}`} label="End user id">
        <input id={`chat-user-${id}`} value={user} onChange={(e) => setUser(e.currentTarget.value)} required />
      </Field>
      <ol className="deliveries" aria-label="Conversation" data-testid="sandbox-chat">
        {lines.map((e) => {
          const message = e.payload.message as { text?: string } | undefined;
          const outbound = e.eventType === 'message.outbound';
          return (
            <li key={e.id} data-from={outbound ? 'app' : 'user'}>
              <strong>{outbound ? 'App' : user}:</strong> {message?.text}{' '}
              {outbound ? <Badge tone="">{status.get(e.id) ?? 'sent'}</Badge> : null}
            </li>
          );
        })}
      </ol>
      <Field id={`chat-text-${id}`} label="Message">
        <input id={`chat-text-${id}`} value={text} onChange={(e) => setText(e.currentTarget.value)} required />
      </Field>
      <div className="actions">
        <button type="submit">Send as the user</button>
        <button type="button" className="ghost" disabled={!text} onClick={() => void say('app')}>
          Send as the app
        </button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}
