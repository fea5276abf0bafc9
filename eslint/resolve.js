// Resolution of our own relative import specifiers for the local lint rules, as TypeScript's
// NodeNext resolution does for .ts sources: `./a.js` names ./a.ts, a folder names its index.ts.
// Package specifiers are not ours and resolve to null.
import { statSync } from 'node:fs'
import path from 'node:path'

function isFile(file) {
  try {
    return statSync(file).isFile()
  } catch {
    return false
  }
}

/** The file a relative specifier names from `fromFile`, or null (packages, missing files). */
export function resolveSpecifier(fromFile, specifier) {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return null
  const target = path.resolve(path.dirname(fromFile), specifier)
  const candidates = target.endsWith('.js')
    ? [target.slice(0, -3) + '.ts', target]
    : [target, target + '.ts', path.join(target, 'index.ts')]
  return candidates.find(isFile) ?? null
}

/** Visitors calling `check(node, specifierLiteral)` for every way a module names another. */
export function importVisitors(check) {
  return {
    ImportDeclaration: (node) => check(node, node.source),
    ExportNamedDeclaration: (node) => check(node, node.source),
    ExportAllDeclaration: (node) => check(node, node.source),
    ImportExpression: (node) => check(node, node.source),
    // `typeof import('../x/y.js')` and `import('../x/y.js').Type` in type positions
    TSImportType: (node) =>
      check(node, node.argument?.type === 'TSLiteralType' ? node.argument.literal : node.argument),
  }
}
