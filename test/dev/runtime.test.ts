// The runtime: npm scripts run on Node 24 even where the machine's own node is older (the
// `node` devDependency is first on their PATH), so tests, `npm start` and the CLI's children
// all get it; supabase-js builds a client with no WebSocket stand-in (it needs Node 22+'s
// global WebSocket); the image builds on node:24.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createClient } from '@supabase/supabase-js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const major = (v: string): number => Number(/^v?(\d+)\./.exec(v)?.[1] ?? 0)

t.test('the tests run on Node 24', async (t) => {
  t.equal(major(process.version), 24, `process.version ${process.version}`)
  // What a shebang (`#!/usr/bin/env node`) or a bare `node` in a script finds first.
  const viaPath = execFileSync('node', ['--version'], { encoding: 'utf8' }).trim()
  t.equal(major(viaPath), 24, `node on the PATH is ${viaPath}`)
  // What spawn(process.execPath) gets.
  const viaExecPath = execFileSync(process.execPath, ['-p', 'process.version'], { encoding: 'utf8' }).trim()
  t.equal(major(viaExecPath), 24)
})

t.test('package.json and the image agree on the runtime', async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  t.equal(pkg.engines.node, '>=22')
  t.match(pkg.devDependencies.node, /^\^24\./, 'the node package pins Node 24 for npm scripts')
  t.match(pkg.devDependencies['@types/node'], /^\^24\./, 'the types are those of the Node npm scripts run on')
  const docker = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8')
  t.match(docker, /^ARG NODE_IMAGE=node:24(-|$)/m)
})

t.test('supabase-js builds a client without any WebSocket stand-in', async (t) => {
  t.equal(typeof globalThis.WebSocket, 'function', 'the runtime has a global WebSocket')
  const supabase = createClient('http://127.0.0.1:9/demo', 'pk_dev_unused', {
    auth: { persistSession: false, autoRefreshToken: false },
  })
  t.type(supabase.from, 'function')
  t.type(supabase.channel, 'function')
})
