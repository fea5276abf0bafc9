#!/usr/bin/env node
// Code shape of src/ (docs/development.md, "Code shape"): functions over a length, the longest
// ones, the deepest nesting of control flow, and lines over 120 characters. Read-only; with
// --max-lines N and --max-depth D it exits 1 when a function breaks either limit, which is how
// `npm run lint` keeps the limits.
//   node scripts/code-metrics.mjs [--top 10] [--max-lines 60] [--max-depth 4] [dir]
import { readFileSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'

const args = process.argv.slice(2)
function flag(name, fallback) {
  const i = args.indexOf(name)
  if (i < 0) return fallback
  const v = Number(args[i + 1])
  args.splice(i, 2)
  return v
}
const top = flag('--top', 10)
const maxLines = flag('--max-lines', null)
const maxDepth = flag('--max-depth', null)
const root = args[0] ?? 'src'
const LIMIT = maxLines ?? 60

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name)
    if (statSync(p).isDirectory()) return files(p)
    return /\.ts$/.test(name) && !/\.d\.ts$/.test(name) ? [p] : []
  })
}

const NESTS = new Set([
  ts.SyntaxKind.IfStatement,
  ts.SyntaxKind.ForStatement,
  ts.SyntaxKind.ForInStatement,
  ts.SyntaxKind.ForOfStatement,
  ts.SyntaxKind.WhileStatement,
  ts.SyntaxKind.DoStatement,
  ts.SyntaxKind.TryStatement,
  ts.SyntaxKind.SwitchStatement,
  ts.SyntaxKind.CatchClause,
])

function nameOf(node, sf) {
  if (node.name) return node.name.getText(sf)
  const p = node.parent
  if (p && ts.isVariableDeclaration(p)) return p.name.getText(sf)
  if (p && ts.isPropertyAssignment(p)) return p.name.getText(sf)
  if (p && ts.isCallExpression(p)) return `${p.expression.getText(sf).slice(0, 40)}(callback)`
  return '(anonymous)'
}

/** Control-flow depth inside one function body, nested `else if` counted once. */
function depthOf(body) {
  let deepest = 0
  const walk = (node, depth) => {
    if (ts.isFunctionLike(node) && node.body !== body) return // measured on its own
    let d = depth
    const elseIf =
      ts.isIfStatement(node) && node.parent && ts.isIfStatement(node.parent) && node.parent.elseStatement === node
    if (NESTS.has(node.kind) && !elseIf) d = depth + 1
    if (d > deepest) deepest = d
    ts.forEachChild(node, (c) => walk(c, d))
  }
  ts.forEachChild(body, (c) => walk(c, 0))
  return deepest
}

const fns = []
let lines = 0
let long = 0
for (const file of files(root)) {
  const text = readFileSync(file, 'utf8')
  const all = text.split('\n')
  lines += all.length
  long += all.filter((l) => l.length > 120).length
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line
      const end = sf.getLineAndCharacterOfPosition(node.end).line
      fns.push({
        where: `${file}:${start + 1}`,
        name: nameOf(node, sf),
        lines: end - start + 1,
        depth: depthOf(node.body),
      })
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
}

const over = fns.filter((f) => f.lines > LIMIT).sort((a, b) => b.lines - a.lines)
const deep = [...fns].sort((a, b) => b.depth - a.depth)
console.log(
  `${fns.length} functions in ${lines} lines of ${root}/; ${over.length} over ${LIMIT} lines (${((over.length / lines) * 1000).toFixed(2)} per 1,000 lines); ${long} lines over 120 characters`,
)
console.log('longest:')
for (const f of over.slice(0, top)) console.log(`  ${f.lines}\t${f.name}\t${f.where}`)
console.log(`deepest nesting: ${deep[0]?.depth ?? 0}`)
for (const f of deep.slice(0, Math.min(top, 5))) console.log(`  ${f.depth}\t${f.name}\t${f.where}`)

const broken = fns.filter((f) => (maxLines !== null && f.lines > maxLines) || (maxDepth !== null && f.depth > maxDepth))
if ((maxLines !== null || maxDepth !== null) && broken.length) {
  console.error(`${broken.length} function(s) over the limits (lines ${maxLines ?? '-'}, depth ${maxDepth ?? '-'})`)
  process.exit(1)
}
