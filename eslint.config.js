// ESLint for src/, test/, bench/ and scripts/: typescript-eslint's recommended rules plus two
// rules of our own (eslint/): part boundaries (each folder of src/ is a part reached only
// through its index.ts) and no import cycles between our modules, type-only imports included.
// Both resolve our relative `.js` specifiers to the .ts sources themselves, as tsc does.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import globals from 'globals'
import noImportCycle from './eslint/no-import-cycle.js'
import partBoundaries from './eslint/part-boundaries.js'

/** What `eslint .` lints: the project's folders and files of sources (nothing else in the root). */
export const PROJECT_SOURCES = ['src/', 'test/', 'bench/', 'scripts/', 'eslint/', 'bin/', 'deploy/', 'eslint.config.js']

/** The configuration; ESLint's cwd is the project root the rules read src/ parts from. */
export function lintConfig() {
  return tseslint.config(
    {
      ignores: ['node_modules/', 'dist/', 'coverage/', '.tap/', '.gatehouse/', 'bench/results/', 'test/fixtures/'],
    },
    {
      // The project's own sources only: a person's scratch files in the checkout (README's
      // try.mjs, say) are theirs, and `npm test` must pass beside them.
      ignores: ['*', '*/', ...PROJECT_SOURCES.map((p) => `!${p}`)],
    },
    js.configs.recommended,
    ...tseslint.configs.recommended,
    {
      files: ['**/*.{ts,js,mjs}'],
      languageOptions: {
        ecmaVersion: 2024,
        sourceType: 'module',
        globals: { ...globals.node },
      },
      plugins: {
        gatehouse: { rules: { 'no-import-cycle': noImportCycle, 'part-boundaries': partBoundaries } },
      },
      rules: {
        'gatehouse/part-boundaries': 'error',
        'gatehouse/no-import-cycle': 'error',
        // `catch {}` is how a best-effort step says "a failure here changes nothing"
        'no-empty': ['error', { allowEmptyCatch: true }],
        '@typescript-eslint/no-unused-vars': [
          'error',
          {
            argsIgnorePattern: '^_',
            varsIgnorePattern: '^_',
            caughtErrors: 'none',
            ignoreRestSiblings: true,
          },
        ],
      },
    },
    {
      // Another package is used through what it exports and documents: no path into its lib/
      // and no member of its private (underscore) state; a driver upgrade must not break us
      // silently (docs/architecture.md, "Libraries").
      files: ['src/**/*.ts'],
      rules: {
        'no-restricted-imports': [
          'error',
          { patterns: [{ regex: '^[^.].*/lib/', message: "Use the package's exports, not its lib/ files." }] },
        ],
        'no-restricted-syntax': [
          'error',
          {
            selector: "CallExpression[callee.name='require'] > Literal[value=/^[^.].*\\/lib\\//]",
            message: "Use the package's exports, not its lib/ files.",
          },
          {
            selector: 'MemberExpression[property.name=/^_[a-zA-Z]/]',
            message: "Another package's private state: use its documented API.",
          },
        ],
      },
    },
    {
      files: ['test/**/*.ts', 'bench/**/*.ts'],
      rules: {
        // tests and benchmarks read JSON bodies whose shape is what they assert
        '@typescript-eslint/no-explicit-any': 'off',
      },
    },
  )
}

export default lintConfig()
