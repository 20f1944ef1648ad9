import { useState } from 'react';
import { patternListProblem, splitPatterns } from '../patterns.ts';
import { Field } from './ui.tsx';

export interface EventFilter {
  eventTypes: string;
  conversationId: string;
  userId: string;
}
export const NO_FILTER: EventFilter = { eventTypes: '', conversationId: '', userId: '' };

/** The filters the stream and Explore share: type patterns, conversation, user. */
export function FilterForm({
  value,
  onApply,
  submitLabel,
}: {
  value: EventFilter;
  onApply: (f: EventFilter) => void;
  submitLabel: string;
}) {
  const [draft, setDraft] = useState(value);
  const problem = patternListProblem(splitPatterns(draft.eventTypes));
  const uuidProblem = (s: string) =>
    s && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s.trim()) ? 'must be a UUID' : undefined;
  const bad = problem ?? uuidProblem(draft.conversationId) ?? uuidProblem(draft.userId);
  return (
    <form
      className="filters"
      onSubmit={(e) => {
        e.preventDefault();
        if (!bad)
          onApply({
            eventTypes: splitPatterns(draft.eventTypes).join(','),
            conversationId: draft.conversationId.trim(),
            userId: draft.userId.trim(),
          });
      }}
    >
      <Field id="f-types" label="Event types" problem={problem} hint="Patterns such as message.* or order.created, comma-separated">
        <input
          id="f-types"
          value={draft.eventTypes}
          aria-invalid={problem ? true : undefined}
          onChange={(e) => setDraft({ ...draft, eventTypes: e.currentTarget.value })}
          placeholder="*"
        />
      </Field>
      <Field id="f-conv" label="Conversation id" problem={uuidProblem(draft.conversationId)}>
        <input id="f-conv" value={draft.conversationId} onChange={(e) => setDraft({ ...draft, conversationId: e.currentTarget.value })} />
      </Field>
      <Field id="f-user" label="User id" problem={uuidProblem(draft.userId)}>
        <input id="f-user" value={draft.userId} onChange={(e) => setDraft({ ...draft, userId: e.currentTarget.value })} />
      </Field>
      <div className="actions">
        <button type="submit" disabled={Boolean(bad)}>
          {submitLabel}
        </button>
      </div>
    </form>
  );
}
