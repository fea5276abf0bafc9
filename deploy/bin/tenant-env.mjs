#!/usr/bin/env node
// Prints the generated values of a tenant file (as `gatehouse tenants create` wrote it) as
// PREFIX_* lines for a .env file, so that other programs (the real PostgREST and GoTrue of
// compose.real-engines.yaml) and a tenant file with ${PREFIX_*} references share them:
//   node tenant-env.mjs <tenant file> <PREFIX>  >> .env
// Runs inside the gatehouse image (the `yaml` package resolves from /app, or from
// GATEHOUSE_HOME) or from a checkout after `npm ci`.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

function fail (message) {
  process.stderr.write(`tenant-env: ${message}\n`)
  process.exit(1)
}

function loadYaml () {
  const here = path.dirname(fileURLToPath(import.meta.url))
  const bases = [process.env.GATEHOUSE_HOME, process.cwd(), '/app', path.resolve(here, '..', '..')]
  for (const base of bases) {
    if (!base) continue
    try { return createRequire(path.join(base, 'package.json'))('yaml') } catch {}
  }
  return fail('cannot find the `yaml` package: run inside the gatehouse image or set GATEHOUSE_HOME')
}

function withSearchPath (url, schema) {
  const u = new URL(url)
  u.searchParams.set('search_path', schema)
  return u.toString()
}

const [file, prefix] = process.argv.slice(2)
if (!file || !prefix) fail('usage: tenant-env.mjs <tenant file> <PREFIX>')
if (!/^[A-Z][A-Z0-9_]*$/.test(prefix)) fail(`prefix "${prefix}" must be upper case (A-Z, 0-9, _)`)

let t
try {
  t = loadYaml().parse(readFileSync(file, 'utf8'))
} catch (err) {
  fail(`cannot read ${file}: ${err.message}`)
}

const need = (value, field) => {
  if (typeof value !== 'string' || value === '' || value.includes('${')) fail(`${file}: ${field} must be a literal value`)
  return value
}
const authn = need(t?.engines?.auth, 'engines.auth')
const values = {
  OWNER_URL: need(t?.postgres, 'postgres'),
  ROLE_ANON: need(t?.roles?.anon, 'roles.anon'),
  ROLE_AUTH: need(t?.roles?.auth, 'roles.auth'),
  ROLE_SVC: need(t?.roles?.svc, 'roles.svc'),
  JWT_SECRET: need(t?.jwt?.secret, 'jwt.secret'),
  JWT_UPSTREAM_SECRET: need(t?.jwt?.upstream_secret, 'jwt.upstream_secret'),
  PUBLIC_KEY: need(t?.keys?.public, 'keys.public'),
  SECRET_KEY: need(t?.keys?.secret, 'keys.secret'),
  REST_DB_URL: need(t?.engines?.rest, 'engines.rest'),
  AUTHN_DB_URL: authn,
  GOTRUE_DB_URL: withSearchPath(authn, 'auth')
}
process.stdout.write(Object.entries(values).map(([k, v]) => `${prefix}_${k}=${v}\n`).join(''))
