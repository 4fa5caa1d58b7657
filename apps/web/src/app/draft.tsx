import { Alert, Button, Group, Text } from '@mantine/core';
import { type SetStateAction, useEffect, useRef, useState } from 'react';

/** What a person edits of something stored, and what they may do when the stored one changes under them. */
export interface Draft<T> {
  value: T;
  set: (next: SetStateAction<T>) => void;
  /** a newer stored value that arrived while the draft held edits of its own */
  newer: { value: T } | null;
  /** the draft becomes the newer stored value; the edits go */
  loadNewer: () => void;
  /** the notice goes; the edits stay */
  keepEditing: () => void;
  /** the person saved `sent`, which the store now holds as `key`: its arrival is theirs, not news */
  saved: (sent: T, key: string | number) => void;
}

/**
 * An editor's text or form over a stored value (the policy document, the
 * identity provider's settings). A newer stored value, told by a new `key`
 * (the refetch after the person's own save, a rollback, another admin's save
 * on a refetch), replaces the draft only while the person has not changed it
 * since: a refetch that lands after they typed on must never throw their
 * typing away. Otherwise the draft stays and `newer` offers the stored one,
 * unless it is the one they saved themselves.
 */
export function useDraft<T>(stored: T, key: string | number): Draft<T> {
  const [value, set] = useState(stored);
  const [newer, setNewer] = useState<{ value: T } | null>(null);
  // the stored value the draft last started from, or the one the person saved; unchanged since when it is the draft
  const unedited = useRef(stored);
  const current = useRef(value);
  current.current = value;
  const ownKey = useRef<string | number | null>(null);
  const latest = useRef(stored);
  latest.current = stored;
  useEffect(() => {
    const arrived = latest.current;
    if (current.current === unedited.current || current.current === arrived) {
      set(arrived);
      setNewer(null);
    } else if (key !== ownKey.current) setNewer({ value: arrived });
    unedited.current = arrived;
  }, [key]);
  return {
    value,
    set,
    newer,
    loadNewer: () => {
      if (newer) set(newer.value);
      setNewer(null);
    },
    keepEditing: () => setNewer(null),
    saved: (sent, savedKey) => {
      unedited.current = sent;
      ownKey.current = savedKey;
      setNewer(null);
    },
  };
}

/** The notice of a newer stored value over an editor that holds unsaved edits: load it, or go on editing. */
export function NewerVersion<T>({ draft, title, load }: { draft: Draft<T>; title: string; load: string }) {
  if (!draft.newer) return null;
  return (
    <Alert mb="sm" color="yellow" title={title} role="status">
      <Text size="sm">Your changes are kept here, unsaved; saving them puts them in its place.</Text>
      <Group mt="xs" gap="xs">
        <Button size="xs" variant="default" onClick={draft.loadNewer}>
          {load}
        </Button>
        <Button size="xs" variant="subtle" onClick={draft.keepEditing}>
          Keep editing
        </Button>
      </Group>
    </Alert>
  );
}
