// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The rules the house holds everyone to (STYLE.md): typescript-eslint's
 * strict set, and the type-aware rules that catch a promise nobody waits
 * for or one passed where a callback's result is ignored. Formatting is
 * Biome's (biome.jsonc), not a lint rule.
 */
export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'libs/platform/database/src/generated/**',
      'coverage/**',
      '**/*.cjs',
      '**/*.mjs',
      '**/*.js',
      '**/*.mts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // tsconfig's noUncheckedIndexedAccess makes every indexed read possibly undefined: a `!` after a
      // check the compiler cannot follow is how the code says "present", and is reviewed as such
      '@typescript-eslint/no-non-null-assertion': 'off',
      // a subclass's constructor that only calls super narrows what it accepts (the error codes of its status)
      '@typescript-eslint/no-useless-constructor': 'off',
      // Nest modules are classes that only carry their decorator
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true }],
      // a `let` a closure reads before its one assignment (a timer the callback clears) cannot be a const
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // a leading underscore says "named to be left out" (a destructured field dropped, an argument an interface imposes)
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    // the CLI and the benchmarks load what one command needs when it runs (CommonJS output): a start that loads everything is slow
    files: ['apps/cli/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-require-imports': 'off', '@typescript-eslint/no-dynamic-delete': 'off' },
  },
  {
    // expiry, retention, backoff and deadlines read the injected Clock (docs/rules/clock.md), so a test moves
    // time instead of waiting for it and every reader in the process agrees on what "now" is. Only the clock
    // itself reads the system time; the standalone programs (cli, aileron-mcp, sandbox-runner, git-helper,
    // mcp-bridge) run without Nest and without tests that move time, so they are left out of the list.
    files: ['libs/**/src/**/*.ts', 'apps/control-plane/**/*.ts', 'apps/worker/**/*.ts'],
    ignores: ['libs/platform/clock/**', '**/*.spec.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='Date'][property.name='now']",
          message:
            'Read the time from the injected Clock (clock.now(), @aileron/clock); a duration for a log or metric is performance.now(). See docs/rules/clock.md.',
        },
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message:
            'Read the time from the injected Clock (clock.date(), @aileron/clock); new Date(value) that parses or converts a given time is fine. See docs/rules/clock.md.',
        },
        {
          selector: "CallExpression[callee.name='Date']",
          message:
            'Date() is the current time as a string: format clock.date() from the injected Clock instead. See docs/rules/clock.md.',
        },
      ],
    },
  },
  {
    // tests reach into what they drive (a parsed manifest, an SDK's private state) where no type says what it is
    files: ['test/**/*.ts', '**/*.spec.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-dynamic-delete': 'off' },
  },
);
