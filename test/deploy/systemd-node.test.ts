// The systemd units refuse a Node older than 22 before anything starts, with a clear message
// in the journal: each unit's ExecStartPre check run as systemd would run it (node -e), on this
// Node and on an older one (the machine's /usr/bin/node when it is older; else the same check
// with the version it reads set to 20.11.0).
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { REPO_ROOT } from '../helpers/e2e-stack.js'

const DIR = path.join(REPO_ROOT, 'deploy', 'systemd')
const units = readdirSync(DIR).filter((f) => f.endsWith('.service'))

/** The script of `ExecStartPre=/usr/bin/node -e "<script>"`. */
function check(unit: string): string | null {
  const m = /^ExecStartPre=\/usr\/bin\/node -e "(.*)"$/m.exec(readFileSync(path.join(DIR, unit), 'utf8'))
  return m === null ? null : m[1]!
}

t.test('every unit checks the Node version first', async (t) => {
  t.ok(units.length >= 5)
  for (const unit of units) {
    const text = readFileSync(path.join(DIR, unit), 'utf8')
    const script = check(unit)
    t.ok(script !== null, `${unit} has the check`)
    if (script === null) continue
    t.ok(text.indexOf('ExecStartPre=') < text.indexOf('ExecStart='), `${unit}: before ExecStart`)
    const ok = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
    t.equal(ok.status, 0, `${unit}: Node ${process.versions.node} passes`)
    const old = spawnSync(process.execPath, ['-e', script.replaceAll('process.versions.node', "'20.11.0'")], {
      encoding: 'utf8',
    })
    t.equal(old.status, 1, `${unit}: Node 20 is refused`)
    t.match(old.stderr, /gatehouse: \/usr\/bin\/node is Node 20\.11\.0: Node 22 or newer is needed/)
  }
})

t.test("the machine's own older node is refused", async (t) => {
  const system = '/usr/bin/node'
  const major = existsSync(system)
    ? Number(spawnSync(system, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).stdout)
    : NaN
  if (!(major < 22)) {
    t.pass(
      `${system} is ${Number.isNaN(major) ? 'absent' : `Node ${major}`}: the version-substituted check above stands for it`,
    )
    return
  }
  const r = spawnSync(system, ['-e', check(units[0]!)!], { encoding: 'utf8' })
  t.equal(r.status, 1)
  t.match(r.stderr, new RegExp(`Node ${major}\\.\\d+\\.\\d+: Node 22 or newer is needed`))
})
