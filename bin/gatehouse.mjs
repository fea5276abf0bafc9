#!/usr/bin/env node
// The `gatehouse` command (`npx --no gatehouse ...` in a checkout after `npm ci`, linked into
// node_modules/.bin by the gatehouse-cli package of this folder). In a checkout it runs
// src/cli.ts through tsx, so no build step and never a stale build; where there is no src/
// (an image or an install of the build) it runs dist/cli.js.
import { existsSync, mkdirSync, realpathSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const major = Number(process.versions.node.split('.')[0])
if (major < 22) {
  process.stderr.write(
    `gatehouse: Node ${process.versions.node} is too old (Node 22 or newer is needed). ` +
      "In a checkout run it as `npx --no gatehouse ...`: npm puts the project's Node 24 first on the PATH.\n",
  )
  process.exit(1)
}

const root = path.resolve(path.dirname(realpathSync(fileURLToPath(import.meta.url))), '..')
const src = path.join(root, 'src', 'cli.ts')
const built = path.join(root, 'dist', 'cli.js')
let entry = built
/** tsx (a development dependency) when installed; null in a production install. */
async function tsxApi() {
  try {
    return await import('tsx/esm/api')
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND') return null
    throw err
  }
}
if (existsSync(src)) {
  // Temporary files (tsx's compile cache among them) stay in the checkout's .gatehouse/,
  // not in the system's temporary directory, unless TMPDIR says otherwise.
  if (!process.env.TMPDIR) {
    const tmp = path.join(root, '.gatehouse', 'tmp')
    try {
      mkdirSync(tmp, { recursive: true, mode: 0o700 })
      process.env.TMPDIR = tmp
    } catch {
      /* read-only checkout */
    }
  }
  const tsx = await tsxApi()
  if (tsx !== null) {
    tsx.register()
    entry = src
  } else if (!existsSync(built)) {
    process.stderr.write(
      'gatehouse: this checkout was installed without its development dependencies (tsx runs src/cli.ts): ' +
        'run `npm ci` (the full install), or `npm run build` in a full install to run dist/cli.js.\n',
    )
    process.exit(1)
  }
} else if (!existsSync(entry)) {
  process.stderr.write(
    `gatehouse: neither ${src} nor ${entry} exists: run \`npm ci\` in the checkout (or \`npm run build\`).\n`,
  )
  process.exit(1)
}
const { main } = await import(pathToFileURL(entry).href)
await main(process.argv)
