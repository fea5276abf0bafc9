#!/usr/bin/env node
// Builds the file tree of the production image in <dir>: what deploy/Dockerfile copies to /app
// and what test/deploy/image-tree.test.ts starts every process from (no Docker needed).
//
//   node scripts/build-image-tree.mjs <dir> [--prefer-offline | --offline]
//
//   <dir>/package.json, package-lock.json   the project's (npm and the CLI's --version read them)
//   <dir>/bin/                              the gatehouse-cli package (the `gatehouse` bin)
//   <dir>/dist/                             tsc's output of src/, with the SQL migrations
//   <dir>/node_modules/                     `npm ci --omit=dev`: production dependencies only
//
// Optional dependencies stay: they are the native builds of runtime packages (the auth
// engine's @node-rs/bcrypt loads @node-rs/bcrypt-<platform> from them). No install script
// runs: no production dependency needs one (package.json's allowScripts names the
// development ones). Needs the checkout's full install (typescript compiles src/).
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { copyAssets } from './copy-assets.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

function fail(message) {
  process.stderr.write(`build-image-tree: ${message}\n`)
  process.exit(1)
}

function run(file, args, cwd) {
  const r = spawnSync(file, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] })
  if (r.error) fail(`cannot run ${path.basename(file)}: ${r.error.message}`)
  if (r.status !== 0) fail(`${path.basename(file)} ${args.join(' ')} failed (exit code ${r.status})`)
}

/** Bytes and files below `dir` (symlinks counted, never followed). */
function treeSize(dir) {
  let bytes = 0
  let files = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) {
      const s = treeSize(p)
      bytes += s.bytes
      files += s.files
    } else {
      bytes += statSync(p, { throwIfNoEntry: false })?.size ?? 0
      files++
    }
  }
  return { bytes, files }
}

/** Installed packages below node_modules (scoped ones counted one by one). */
function countPackages(nodeModules) {
  let n = 0
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory() || e.name.startsWith('.')) continue
      const p = path.join(dir, e.name)
      if (e.name.startsWith('@')) {
        walk(p)
        continue
      }
      n++
      if (existsSync(path.join(p, 'node_modules'))) walk(path.join(p, 'node_modules'))
    }
  }
  if (existsSync(nodeModules)) walk(nodeModules)
  return n
}

const args = process.argv.slice(2)
const npmFlags = args.filter((a) => a === '--prefer-offline' || a === '--offline')
const rest = args.filter((a) => !npmFlags.includes(a))
if (rest.length !== 1) fail('usage: build-image-tree.mjs <dir> [--prefer-offline | --offline]')
const out = path.resolve(rest[0])
if (out === root || out.startsWith(root + path.sep)) {
  // Inside the checkout, Node would resolve a missing package from the checkout's own
  // node_modules: the tree must stand alone.
  fail(`${out} is inside the checkout: build the tree elsewhere`)
}
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
if (!existsSync(tsc)) fail('typescript is not installed: run `npm ci` (the full install) first')

mkdirSync(out, { recursive: true })
for (const name of ['dist', 'bin', 'node_modules']) rmSync(path.join(out, name), { recursive: true, force: true })

// 1. The compiled sources and the files they read at run time.
run(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', path.join(out, 'dist')], root)
copyAssets(path.join(root, 'src'), path.join(out, 'dist'))
if (!readdirSync(path.join(out, 'dist', 'platform', 'migrations')).some((f) => f.endsWith('.sql'))) {
  fail('no SQL migration in dist/platform/migrations')
}

// 2. The manifest, the lock file and the bin package the lock file links (file:bin).
for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(root, f), path.join(out, f))
cpSync(path.join(root, 'bin'), path.join(out, 'bin'), { recursive: true })

// 3. Production dependencies, native optional builds included; no install script runs.
const npm = process.env.npm_execpath
run(
  npm !== undefined && npm.endsWith('.js') ? process.execPath : 'npm',
  [
    ...(npm !== undefined && npm.endsWith('.js') ? [npm] : []),
    'ci',
    '--omit=dev',
    '--ignore-scripts',
    '--no-audit',
    '--no-fund',
    '--loglevel=error',
    ...npmFlags,
  ],
  out,
)

const nm = treeSize(path.join(out, 'node_modules'))
const all = treeSize(out)
process.stdout.write(
  `build-image-tree: ${out}: ${countPackages(path.join(out, 'node_modules'))} packages, ` +
    `node_modules ${(nm.bytes / 1e6).toFixed(1)} MB, tree ${(all.bytes / 1e6).toFixed(1)} MB in ${all.files} files\n`,
)
