// ESLint rule: a module imports another part only through that part's index.ts.
// Each folder of src/ is a part; its index.ts is its one public entry, so the part can reshape
// its inside without touching its users. Which parts a file may reach into:
//   src/<part>/**                       its own part
//   test/<part>/**, bench/<part>-*.ts   that part too (to test or time one stage alone)
//   anything else (src/*.ts entry files, test/helpers, test/e2e, scripts ...)   none
import { readdirSync } from 'node:fs'
import path from 'node:path'
import { importVisitors, resolveSpecifier } from './resolve.js'

const partsByRoot = new Map()

function partsOf(root) {
  let parts = partsByRoot.get(root)
  if (parts === undefined) {
    try {
      parts = readdirSync(path.join(root, 'src'), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
    } catch {
      parts = []
    }
    partsByRoot.set(root, parts)
  }
  return parts
}

/** The parts whose inside the file at `segments` (relative to the root) may import. */
function ownParts(segments, parts) {
  const [top, second] = segments
  if ((top === 'src' || top === 'test') && segments.length > 2 && parts.includes(second)) return [second]
  if (top === 'bench' && segments.length === 2) {
    return parts.filter((part) => second === `${part}.ts` || second.startsWith(`${part}-`))
  }
  return []
}

export default {
  meta: {
    type: 'problem',
    docs: { description: "Forbid imports of another part's modules other than its index.ts" },
    schema: [],
    messages: {
      internal:
        "'{{specifier}}' reaches inside the {{part}} part: import it through src/{{part}}/index.ts, its one public entry",
    },
  },
  create(context) {
    const root = context.cwd
    const parts = partsOf(root)
    const own = ownParts(path.relative(root, context.physicalFilename).split(path.sep), parts)
    const check = (node, source) => {
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return
      const target = resolveSpecifier(context.physicalFilename, source.value)
      if (target === null) return
      const [top, part, ...rest] = path.relative(root, target).split(path.sep)
      if (top !== 'src' || !parts.includes(part) || own.includes(part)) return
      if (rest.length === 1 && rest[0] === 'index.ts') return
      context.report({ node: source, messageId: 'internal', data: { specifier: source.value, part } })
    }
    return importVisitors(check)
  },
}
