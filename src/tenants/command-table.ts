// The `gatehouse tenants ...` commands as tables: each row names a command, its arguments and
// options (in the order --help lists them) and its action; declareCommands hands them to
// commander. The tenant store's commands and the provisioning commands (src/platform) use it.
import type { Command } from 'commander'

/** [flags or argument, description] as commander takes them. */
type Flag = readonly [string, string]

export interface CommandRow {
  name: string
  description: string
  args?: readonly Flag[]
  /** Options that must be given (listed first). */
  required?: readonly Flag[]
  options?: readonly Flag[]
  action: Parameters<Command['action']>[0]
}

/** Prints `text` on stdout as one or more whole lines. */
export function out(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : text + '\n')
}

/** Declares every row as a subcommand of `parent`. */
export function declareCommands(parent: Command, rows: readonly CommandRow[]): void {
  for (const row of rows) {
    const command = parent.command(row.name).description(row.description)
    for (const [name, text] of row.args ?? []) command.argument(name, text)
    for (const [flags, text] of row.required ?? []) command.requiredOption(flags, text)
    for (const [flags, text] of row.options ?? []) command.option(flags, text)
    command.action(row.action)
  }
}
