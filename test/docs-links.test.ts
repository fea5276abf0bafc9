// README.md and docs/*.md link only to what exists: every relative link names a file of the
// repository, and every #anchor a heading of its page (GitHub's heading ids).
import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { REPO_ROOT } from './helpers/e2e-stack.js'

const pages = [
  'README.md',
  'deploy/README.md',
  ...readdirSync(path.join(REPO_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

/** GitHub's id of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

function anchors(file: string): Set<string> {
  const out = new Set<string>()
  let fence = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('```')) fence = !fence
    const m = !fence && /^#{1,6} (.+)$/.exec(line)
    if (m) out.add(slug(m[1]!))
  }
  return out
}

t.test('relative links and anchors resolve', async (t) => {
  for (const page of pages) {
    const file = path.join(REPO_ROOT, page)
    const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```$/gm, '')
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!
      if (/^[a-z]+:/.test(target)) continue
      const [rel, anchor] = target.split('#') as [string, string | undefined]
      const dest = rel === '' ? file : path.resolve(path.dirname(file), rel)
      t.ok(existsSync(dest), `${page}: ${target} exists`)
      if (anchor !== undefined && dest.endsWith('.md') && existsSync(dest))
        t.ok(anchors(dest).has(anchor), `${page}: ${target} names a heading`)
    }
  }
})
