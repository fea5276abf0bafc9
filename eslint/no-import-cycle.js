// ESLint rule: no import cycle between the project's own modules, counting type-only imports.
// import-x/no-cycle skips `import type`, yet a cycle through types still ties two modules
// together (neither can move or be read alone); a part's shared types belong in a types
// module that imports none of the modules using them. Relative specifiers are resolved as
// NodeNext does for .ts sources (`./a.js` names ./a.ts); the other modules' imports are read
// from disk with TypeScript's import scanner and kept for the rest of the run.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { importVisitors, resolveSpecifier } from './resolve.js'

const importsOnDisk = new Map()

function importsOf(file) {
  let found = importsOnDisk.get(file)
  if (found === undefined) {
    let text = ''
    try {
      text = readFileSync(file, 'utf8')
    } catch {
      // a file that vanished has no imports
    }
    const scanned = ts.preProcessFile(text, true, true).importedFiles
    found = [...new Set(scanned.map((entry) => resolveSpecifier(file, entry.fileName)).filter(Boolean))]
    importsOnDisk.set(file, found)
  }
  return found
}

/** The shortest chain of imports from `start` back to `goal`, or null. */
function pathBack(start, goal) {
  const previous = new Map([[start, null]])
  const queue = [start]
  while (queue.length > 0) {
    const file = queue.shift()
    for (const next of importsOf(file)) {
      if (next === goal) {
        const chain = [file]
        for (let at = previous.get(file); at !== null; at = previous.get(at)) chain.unshift(at)
        return chain
      }
      if (!previous.has(next)) {
        previous.set(next, file)
        queue.push(next)
      }
    }
  }
  return null
}

export default {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid import cycles between project modules, type-only imports included' },
    schema: [],
    messages: { cycle: 'import cycle: {{chain}}' },
  },
  create(context) {
    const filename = context.physicalFilename
    const root = context.cwd
    const check = (node, source) => {
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return
      const target = resolveSpecifier(filename, source.value)
      if (target === null || target === filename) return
      const chain = pathBack(target, filename)
      if (chain === null) return
      const names = [filename, ...chain, filename].map((file) => path.relative(root, file))
      context.report({ node, messageId: 'cycle', data: { chain: names.join(' -> ') } })
    }
    return importVisitors(check)
  },
}
