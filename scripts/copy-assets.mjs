#!/usr/bin/env node
// Build step after tsc: copies the non-TypeScript files the code reads at run time
// (the platform's SQL migrations) from src/ to the same place under dist/ (or under the
// directory given as the first argument: scripts/build-image-tree.mjs builds elsewhere).
import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const ASSETS = [{ dir: 'platform/migrations', ext: '.sql' }]

/** Copies the run-time assets of `srcDir` to the same places below `distDir`. */
export function copyAssets(srcDir, distDir) {
  for (const { dir, ext } of ASSETS) {
    const from = path.join(srcDir, dir)
    const to = path.join(distDir, dir)
    if (!existsSync(from)) continue
    mkdirSync(to, { recursive: true })
    for (const f of readdirSync(from)) {
      if (f.endsWith(ext)) cpSync(path.join(from, f), path.join(to, f))
    }
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  copyAssets(path.join(root, 'src'), path.resolve(process.argv[2] ?? path.join(root, 'dist')))
}
