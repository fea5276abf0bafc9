// `gatehouse dev --reset`: the development stack's state goes, the cluster with it wherever it
// lives (.gatehouse/pg, or the directory outside the checkout its LOCATION names when Postgres
// runs as another user). Refused while a stack runs here: it owns that state.
import { rmSync } from 'node:fs'
import { acquireDevLock } from './lock.js'
import { removeDevCluster } from './postgres.js'

/** Removes `stateDir` and its cluster; returns the directories removed. */
export async function resetDevState(stateDir: string, describe?: (pid: number) => string): Promise<string[]> {
  const lock = acquireDevLock(stateDir, describe === undefined ? undefined : (owner) => describe(owner.pid))
  try {
    const removed = await removeDevCluster(stateDir)
    rmSync(stateDir, { recursive: true, force: true })
    return [...removed, stateDir]
  } finally {
    lock.release()
  }
}
