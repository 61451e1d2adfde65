// What Redis's MONITOR shows of a script, read back: it escapes the script's
// newlines (and other control characters), so the script an EVALSHA runs is
// found by the SHA of the real text, which is what the server knows it by.

import { createHash } from 'node:crypto'

const ESCAPED = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '\\': '\\', '"': '"' }

/** The script MONITOR showed as `shown`, as it was sent. */
export const realScript = (shown) =>
  shown.replace(/\\(x[0-9a-fA-F]{2}|[nrtab\\"])/g, (_, c) => (c.length === 3 ? String.fromCharCode(parseInt(c.slice(1), 16)) : ESCAPED[c]))

/** The SHA an EVALSHA names the script MONITOR showed as `shown` by. */
export const shaOfShown = (shown) => createHash('sha1').update(realScript(shown)).digest('hex')
