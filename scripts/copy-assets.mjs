#!/usr/bin/env node
// Build step after tsc: copies the non-TypeScript files the code reads at run time
// (the platform's SQL migrations) from src/ to the same place under dist/.
import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const ASSETS = [{ dir: 'platform/migrations', ext: '.sql' }]

for (const { dir, ext } of ASSETS) {
  const from = path.join(root, 'src', dir)
  const to = path.join(root, 'dist', dir)
  if (!existsSync(from)) continue
  mkdirSync(to, { recursive: true })
  for (const f of readdirSync(from)) {
    if (f.endsWith(ext)) cpSync(path.join(from, f), path.join(to, f))
  }
}
