import { type ReactNode, useState } from 'react';

/** Pretty JSON in a scrollable, focusable block (keyboard users can scroll it). */
export function Json({ value }: { value: unknown }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable block must be reachable by keyboard
    <pre className="json" tabIndex={0}>
      {typeof value === 'string' ? value : JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** Copies text to the clipboard and says so. */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      className="small ghost"
      onClick={async () => {
        await navigator.clipboard?.writeText(text).catch(() => undefined);
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
    </button>
  );
}

export function ErrorNote({ error }: { error: string | undefined }) {
  return error ? (
    <p className="error" role="alert">
      {error}
    </p>
  ) : null;
}

/** What an action did, announced politely; nothing until there is something to say. */
export function Notice({ text }: { text: string | undefined }) {
  return text ? (
    <p className="notice" role="status">
      {text}
    </p>
  ) : null;
}

/** A table that scrolls sideways on narrow screens, captioned for screen readers; `head` is its header cells. */
export function Table({ caption, head, children }: { caption: string; head: ReactNode; children: ReactNode }) {
  return (
    <div className="table-wrap">
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead>
          <tr>{head}</tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** A label above its control; `hint` and `problem` are tied to the control for screen readers. */
export function Field({
  id,
  label,
  hint,
  problem,
  children,
}: {
  id: string;
  label: string;
  hint?: ReactNode;
  problem?: string;
  children: ReactNode;
}) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children}
      {hint ? (
        <small id={`${id}-hint`} className="hint">
          {hint}
        </small>
      ) : null}
      {problem ? (
        <small id={`${id}-problem`} className="problem" role="alert">
          {problem}
        </small>
      ) : null}
    </div>
  );
}

/** A secret the API shows once: highlighted, copyable, with the warning that it will not come back. */
export function SecretOnce({ title, secret, children }: { title: string; secret: string; children?: ReactNode }) {
  return (
    <div className="secret-once" role="status">
      <strong>{title}</strong>
      <p>Copy it now: it is not shown again.</p>
      <code className="secret" data-testid="secret">
        {secret}
      </code>{' '}
      <CopyButton text={secret} label="Copy" />
      {children}
    </div>
  );
}

export const Badge = ({ tone, children }: { tone: string; children: ReactNode }) => <span className={`badge ${tone}`}>{children}</span>;

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/** Delete, after the person confirms `question`. */
export function DeleteButton({ question, onConfirmed }: { question: string; onConfirmed: () => void }) {
  return (
    <button type="button" className="danger" onClick={() => window.confirm(question) && onConfirmed()}>
      Delete
    </button>
  );
}
