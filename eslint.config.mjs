// One linter for the whole tree (npm run lint, part of npm test). typescript-eslint's recommended
// rules everywhere; the type-aware promise rules only where the code runs in production (the
// server and the packages), where a promise nobody awaits is a lost write or an unhandled failure.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Programs as the linter's cache can key them: it keys its results by the configuration as JSON,
 * which a program is not, so they are named by the tsconfig they were read from.
 */
function namedPrograms(programs) {
  return Object.assign(programs, {
    toJSON: () => programs.map((program) => program.getCompilerOptions().configFilePath),
  });
}

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'bench/.peers/**',
      'bench/results/**',
      'clients/**',
      'coverage/**',
      'data/**',
      // docs/sdk-python.md's virtual environment: pip's files, not this project's.
      '**/.venv/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: { console: 'readonly', process: 'readonly' } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // The compiler already refuses unused names (tsconfig noUnusedLocals/Parameters); `_`-prefixed ones are deliberate.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // Tests and fixtures read untyped JSON answers; the type check covers the rest.
      '@typescript-eslint/no-explicit-any': 'off',
      'no-undef': 'off',
      // A variable a closure reads before its one assignment cannot be a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // package.json is read where the running build finds it (dist/ sits beside it), not bundled.
      '@typescript-eslint/no-require-imports': ['error', { allow: ['/package\\.json$'] }],
    },
  },
  {
    files: ['src/**/*.ts', 'packages/*/src/**/*.ts', 'projections/src/**/*.ts'],
    // One program for all of them, the type check's own (tsconfig.json reads the workspaces from
    // source): a program per workspace's tsconfig would parse the same libraries six times over.
    // scripts/typecheck-and-lint.cjs hands over the program its type check built instead (npm test).
    languageOptions: {
      parserOptions: globalThis.typeCheckedProgram
        ? { programs: namedPrograms([globalThis.typeCheckedProgram]), project: null }
        : { project: ['./tsconfig.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': [
        'error',
        { checksVoidReturn: { arguments: false, attributes: false } },
      ],
    },
  },
  {
    files: ['**/*.cjs', '**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The incident console: ES modules the browser loads as they are (src/ui/ui-assets.ts).
    files: ['src/ui/assets/**/*.js'],
    languageOptions: { sourceType: 'module' },
  },
);
