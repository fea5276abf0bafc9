// State files one process rewrites while another reads them (.gatehouse/dev.json, the
// development stack's generated tenant files, a tenants directory's .gitignore): written to a
// temporary file beside the target and renamed over it, so a reader sees the old text or the new
// one, never a truncated or half-written file (docs/development.md).
import { randomBytes } from 'node:crypto'
import { closeSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import path from 'node:path'

/**
 * Replaces `file` with `text` at once (rename of a temporary file in the same directory); with
 * `exclusive`, creates it instead and fails with EEXIST when it exists (a hard link, which never
 * replaces). `onlyIf`, asked once the text is on disk, right before the rename: false leaves
 * `file` as it is, and the result is false.
 */
export function writeFileAtomic(
  file: string,
  text: string,
  opts: { mode?: number; exclusive?: boolean; onlyIf?: () => boolean } = {},
): boolean {
  const tmp = path.join(
    path.dirname(file),
    `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`,
  )
  try {
    const fd = openSync(tmp, 'wx', opts.mode ?? 0o666)
    try {
      writeSync(fd, text)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    if (opts.onlyIf?.() === false) return false
    if (opts.exclusive) linkSync(tmp, file)
    else renameSync(tmp, file)
    return true
  } finally {
    rmSync(tmp, { force: true })
  }
}
