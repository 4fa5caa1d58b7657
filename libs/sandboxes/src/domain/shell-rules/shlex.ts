/**
 * Splits a string into words the way POSIX sh quoting does, without expanding
 * anything (as Rust's `shlex::split`, which Codex uses for `.rules` examples):
 * null when a quote is left open or the string ends in a lone backslash.
 */
export function splitShellWords(input: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  for (let at = 0; at < input.length; at++) {
    const c = input[at]!;
    if (c === ' ' || c === '\t' || c === '\n') {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === '#' && word === null) {
      const end = input.indexOf('\n', at);
      at = end < 0 ? input.length : end;
    } else if (c === '\\') {
      if (++at >= input.length) return null;
      if (input[at] !== '\n') word = (word ?? '') + input[at];
    } else if (c === "'") {
      const end = input.indexOf("'", at + 1);
      if (end < 0) return null;
      word = (word ?? '') + input.slice(at + 1, end);
      at = end;
    } else if (c === '"') {
      const quoted = doubleQuoted(input, at + 1);
      if (!quoted) return null;
      word = (word ?? '') + quoted.value;
      at = quoted.end;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (word !== null) words.push(word);
  return words;
}

/** Inside double quotes a backslash escapes only $ ` " \ and a newline. */
function doubleQuoted(input: string, start: number): { value: string; end: number } | null {
  let value = '';
  for (let at = start; at < input.length; at++) {
    const c = input[at]!;
    if (c === '"') return { value, end: at };
    if (c === '\\' && at + 1 < input.length && '$`"\\\n'.includes(input[at + 1]!)) {
      at++;
      if (input[at] !== '\n') value += input[at];
    } else {
      value += c;
    }
  }
  return null;
}
