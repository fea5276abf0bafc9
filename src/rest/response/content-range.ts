// Content-Range of reads and RPC (docs/rest-protocol.md §2.6): `<first>-<last>/<total>`, `*` for an empty
// page (or a known total of 0) and for an unknown total.

export function contentRange(offset: number, pageTotal: number, total: number | null): string {
  const range = pageTotal === 0 || total === 0 ? '*' : `${offset}-${offset + pageTotal - 1}`
  return `${range}/${total === null ? '*' : total}`
}
