// What the docs test reads from README.md and docs/*.md: the code blocks, the
// links (with GitHub's anchors) and the repository paths a page names.
import { readFileSync, readdirSync, existsSync } from 'node:fs'
import { join, dirname, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))

/** README.md and every page of docs/, as { file, text } (file relative to the root). */
export function pages() {
  const files = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
  return files.map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') }))
}

/** A block not to run says so on the line before its fence: `<!-- not run: the reason -->`. */
export const NOT_RUN = /<!-- not run: (.+?) -->\n$/

/**
 * The fenced blocks of one language, with what precedes each (to find a
 * `not run` mark) and their indentation removed (a block inside a list item).
 */
export function blocks(text, lang) {
  const found = []
  for (const m of text.matchAll(new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^ *\`\`\`$`, 'gm'))) {
    const indent = m[1].length
    const source = m[2]
      .split('\n')
      .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
      .join('\n')
    const before = text.slice(0, m.index)
    const line = before.split('\n').length
    const notRun = before.slice(before.lastIndexOf('\n', before.length - 2) + 1).match(NOT_RUN)?.[1]
    found.push({ source, line, notRun })
  }
  return found
}

/** The text outside fenced blocks and inline code. */
function prose(text) {
  return text.replace(/^ *```[\s\S]*?^ *```$/gm, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
export function anchors(text) {
  const seen = new Map()
  const out = new Set()
  for (const m of text.replace(/^ *```[\s\S]*?^ *```$/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** Every relative link of a page: { target, file, anchor } with file relative to the root. */
export function links(file, text) {
  const found = []
  for (const m of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]
    if (/^[a-z]+:/i.test(target)) continue
    const [path, anchor] = target.split('#')
    const to = path ? relative(root, join(root, dirname(file), path)) : file
    found.push({ target, file: to, anchor })
  }
  return found
}

const TOP = ['__test__', 'lib', 'src', 'support', 'bench', 'examples', 'scripts', 'npm', 'docs', '.ci']
/** The repository paths a page names (`lib/verify/verify.js`, `src/store/`, `__test__/stores/contract/*-tls.test.mjs`). */
export function paths(text) {
  const found = new Set()
  const re = new RegExp(`(?<![\\w./-])((?:${TOP.map((t) => t.replace('.', '\\.')).join('|')})/[\\w./*<>-]*)`, 'g')
  for (const m of text.matchAll(re)) {
    const path = m[1].replace(/[.,:;)]+$/, '')
    if (path.includes('<')) continue // a pattern such as npm/<platform>
    found.add(path)
  }
  return [...found]
}

/** Whether a path exists; `*` matches within one path part. */
export function exists(path) {
  if (!path.includes('*')) return existsSync(join(root, path))
  const parts = path.replace(/\/$/, '').split('/')
  const walk = (dir, i) => {
    if (i === parts.length) return true
    const part = parts[i]
    if (!part.includes('*')) return existsSync(join(dir, part)) && walk(join(dir, part), i + 1)
    const re = new RegExp(`^${part.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`)
    let entries = []
    try {
      entries = readdirSync(dir)
    } catch {
      return false
    }
    return entries.some((e) => re.test(e) && walk(join(dir, e), i + 1))
  }
  return walk(root, 0)
}
