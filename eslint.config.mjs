// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The rules the house holds everyone to (STYLE.md): typescript-eslint's
 * strict set, and the type-aware rules that catch a promise nobody waits
 * for or one passed where a callback's result is ignored. Formatting is
 * Prettier's (.prettierrc.json), not a lint rule.
 */
export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'libs/platform/database/src/generated/**', 'coverage/**', '**/*.cjs', '**/*.mjs', '**/*.js', '**/*.mts'] },
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
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // the CLI and the benchmarks load what one command needs when it runs (CommonJS output): a start that loads everything is slow
    files: ['apps/cli/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-require-imports': 'off', '@typescript-eslint/no-dynamic-delete': 'off' },
  },
  {
    // tests reach into what they drive (a parsed manifest, an SDK's private state) where no type says what it is
    files: ['test/**/*.ts', '**/*.spec.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-dynamic-delete': 'off' },
  },
);
