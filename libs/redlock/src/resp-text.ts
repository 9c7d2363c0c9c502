/** The EVALSHA just encoded, kept for the other nodes the same call goes to (see evalshaText). */
let lastEvalsha: { sha: string; keys: readonly string[]; args: readonly string[]; text: string } | undefined;

/**
 * An EVALSHA's text (RESP), made once per call, not once per node: the same call goes to every
 * node with the same key and argument arrays (CallCoalescer). It stays a string: a socket writes a
 * string's bytes without the Buffer that converting it first would allocate.
 */
export function evalshaText(sha: string, keys: readonly string[], args: readonly string[]): string {
  if (lastEvalsha?.sha !== sha || lastEvalsha.keys !== keys || lastEvalsha.args !== args) {
    lastEvalsha = { sha, keys, args, text: scriptText('evalsha', sha, keys, args, charCount) };
    // Only for the nodes of this call, which are sent to in one go: arrays reused later may have changed.
    queueMicrotask(() => (lastEvalsha = undefined));
  }
  return lastEvalsha.text;
}

/** An EVAL's text: the script's source, for a node that does not have it yet. */
export function evalText(source: string, keys: readonly string[], args: readonly string[]): string {
  return scriptText('eval', source, keys, args, Buffer.byteLength);
}

/** Any command's text. */
export function commandText(parts: readonly string[]): string {
  let text = `*${parts.length}\r\n`;
  for (const part of parts) text += `$${Buffer.byteLength(part)}\r\n${part}\r\n`;
  return text;
}

const charCount = (part: string): number => part.length;

/**
 * The text of an EVALSHA or EVAL, each part's length in bytes as `size` counts them. Counted in
 * characters first: right while the whole text is ASCII, which one byte count of the whole tells
 * (one native call, not one per part); else counted again in bytes.
 */
function scriptText(
  command: 'evalsha' | 'eval',
  script: string,
  keys: readonly string[],
  args: readonly string[],
  size: (part: string) => number,
): string {
  const count = String(keys.length);
  let text = `*${3 + keys.length + args.length}\r\n$${command.length}\r\n${command}\r\n$${size(script)}\r\n${script}\r\n$${count.length}\r\n${count}\r\n`;
  for (const part of keys) text += `$${size(part)}\r\n${part}\r\n`;
  for (const part of args) text += `$${size(part)}\r\n${part}\r\n`;
  if (size === charCount && Buffer.byteLength(text) !== text.length)
    return scriptText(command, script, keys, args, Buffer.byteLength);
  return text;
}
