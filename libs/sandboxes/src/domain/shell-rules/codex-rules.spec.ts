import { describe, expect, it } from 'vitest';
import { parseCodexRules } from './codex-rules';
import { ShellRulesError } from './shell-errors';
import { decide } from './test-builders';

// The example from Codex's documentation of `.rules` files.
const CODEX_EXAMPLE = `# Prompt before running commands with the prefix \`gh pr view\` outside the sandbox.
prefix_rule(
    # The prefix to match.
    pattern = ["gh", "pr", "view"],

    # The action to take when Codex requests to run a matching command.
    decision = "prompt",

    # Optional rationale for why this rule exists.
    justification = "Viewing PRs is allowed with approval",

    match = [
        "gh pr view 7888",
        "gh pr view --repo openai/codex",
        "gh pr view 7888 --json title,body,comments",
    ],
    not_match = [
        # Does not match because the \`pattern\` must be an exact prefix.
        "gh pr --repo openai/codex view 7888",
    ],
)
`;

function refusal(text: string): ShellRulesError {
  try {
    parseCodexRules(text, 'team.rules');
  } catch (error) {
    if (error instanceof ShellRulesError) return error;
    throw error;
  }
  throw new Error('the file was accepted');
}

describe('parseCodexRules', () => {
  it("reads Codex's documented example", () => {
    expect(parseCodexRules(CODEX_EXAMPLE)).toEqual([
      {
        program: 'gh',
        args: ['pr', 'view'],
        decision: 'prompt',
        justification: 'Viewing PRs is allowed with approval',
        source: '.rules line 2',
      },
    ]);
  });

  it('gives one rule per program when the first token has alternatives, and keeps later alternatives', () => {
    const rules = parseCodexRules(`prefix_rule(pattern = [["bash", "sh"], ["-c", "-l"], ["x"]])`, 'shells.rules');
    expect(rules).toEqual([
      { program: 'bash', args: [['-c', '-l'], 'x'], decision: 'allow', source: 'shells.rules line 1' },
      { program: 'sh', args: [['-c', '-l'], 'x'], decision: 'allow', source: 'shells.rules line 1' },
    ]);
  });

  it('reads the line Codex appends, positional arguments, several rules, and semicolons', () => {
    const text = `prefix_rule(pattern=["python3"], decision="allow")\nprefix_rule(['npm', 'publish'], 'forbidden'); prefix_rule(pattern=['ls',],)\n\n`;
    expect(parseCodexRules(text).map((rule) => [rule.program, rule.args, rule.decision, rule.source])).toEqual([
      ['python3', [], 'allow', '.rules line 1'],
      ['npm', ['publish'], 'forbidden', '.rules line 2'],
      ['ls', [], 'allow', '.rules line 2'],
    ]);
  });

  it('reads Starlark strings: escapes, raw and triple-quoted', () => {
    const [rule] = parseCodexRules(
      `prefix_rule(pattern=["a\\tb", r"c\\d", '''e"f''', "\\x41\\u00e9\\101", 'it\\'s', "g\\it", r'it\\'s'])`,
    );
    expect(rule!.program).toBe('a\tb');
    expect(rule!.args).toEqual(['c\\d', 'e"f', 'AéA', "it's", 'g\\it', "it's"]);
  });

  it('reads names assigned to strings and lists, and + between them, as Codex evaluates them', () => {
    const text = `SHELLS = ["bash", "sh"]
EXTRA = SHELLS + ["zsh"]
FLAG = "-" + "c"
prefix_rule(pattern = [EXTRA, FLAG], decision = "prompt", match = [["zsh", "-c", "x"]], not_match = ["fish -c x"])
RISKY = [["push", "fetch"]]
RISKY += [["--force", "-f"]]
prefix_rule(pattern = ["git"] + RISKY, decision = "forbidden")
SHELLS = ["ignored"]
`;
    expect(parseCodexRules(text).map((rule) => [rule.program, rule.args, rule.decision])).toEqual([
      ['bash', ['-c'], 'prompt'],
      ['sh', ['-c'], 'prompt'],
      ['zsh', ['-c'], 'prompt'],
      [
        'git',
        [
          ['push', 'fetch'],
          ['--force', '-f'],
        ],
        'forbidden',
      ],
    ]);
  });

  it('extends a list in place with +=, so every name bound to it sees the change, as in Starlark', () => {
    const text =
      'A = ["rm"]\nB = A\nA += ["shred"]\nC = A + ["dd"]\nA += ["wipe"]\nprefix_rule(pattern = [B])\nprefix_rule(pattern = [C])';
    expect(parseCodexRules(text).map((rule) => rule.program)).toEqual(['rm', 'shred', 'wipe', 'rm', 'shred', 'dd']);
  });

  it('takes the arguments of a call as they are when it is made, as Codex runs the file from top to bottom', () => {
    const text =
      'GIT = ["git"]\nprefix_rule(pattern = GIT, decision = "prompt")\nGIT += ["push"]\nprefix_rule(pattern = GIT, decision = "forbidden")';
    expect(parseCodexRules(text).map((rule) => [rule.program, rule.args, rule.decision])).toEqual([
      ['git', [], 'prompt'],
      ['git', ['push'], 'forbidden'],
    ]);
  });

  it('reads docstrings, pass and semicolons, which run nothing', () => {
    const text = '"""Team rules."""\npass\nX = ["ls"]; prefix_rule(pattern = X);\n';
    expect(parseCodexRules(text)).toHaveLength(1);
  });

  it('gives the host paths of host_executable to the rules of that name, wherever it stands in the file', () => {
    const text =
      'prefix_rule(pattern = ["git", "push"], decision = "forbidden")\nhost_executable(name = "git", paths = ["/usr/bin/git", "/usr/bin//git"])\nprefix_rule(pattern = ["/usr/bin/git"])';
    expect(parseCodexRules(text).map((rule) => [rule.program, rule.paths])).toEqual([
      ['git', ['/usr/bin/git']],
      ['/usr/bin/git', undefined],
    ]);
  });

  it('reads a network_rule that allows, which changes nothing here', () => {
    const text =
      'network_rule(host = "API.example.com:443", protocol = "https", decision = "allow")\nprefix_rule(pattern = ["curl"], decision = "prompt")';
    expect(parseCodexRules(text).map((rule) => rule.program)).toEqual(['curl']);
  });

  it('accepts examples as strings (split as a shell would) or lists, with a path for the program', () => {
    const text = `prefix_rule(pattern=["git", "commit"], match=["/usr/bin/git commit -m 'a b'", ["git", "commit"]], not_match=[["git", "commit-tree"], "git log"])`;
    expect(parseCodexRules(text)).toHaveLength(1);
  });

  it('rules read from a file decide commands', () => {
    const rules = parseCodexRules(
      CODEX_EXAMPLE + `prefix_rule(pattern=["rm", ["-rf", "-fr"]], decision="forbidden", justification="Use trash.")\n`,
    );
    expect(decide('gh pr view 1 | cat', rules)).toMatchObject({ decision: 'prompt', rule: rules[0] });
    expect(decide('sudo rm -fr /', rules).reason).toBe(
      'rm -fr / (run by sudo): forbidden by rule "rm [-rf|-fr]" (.rules line 22): Use trash.',
    );
  });
});

const NOT_RUN =
  'a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls';

describe('a file Codex would refuse, or that would need running, is refused with its line', () => {
  it.each([
    ['load("//x.star", "y")', 1, 1, `"load" is not supported: ${NOT_RUN}`],
    ['\n\nx = ["git"][0]', 3, 12, `indexing a value is not supported: ${NOT_RUN}`],
    ['X = {"a": 1}', 1, 5, `a dict is not supported: ${NOT_RUN}`],
    ['X = ["a" for a in []]', 1, 10, `"for" is not supported: ${NOT_RUN}`],
    ['X = "a" if True else "b"', 1, 9, `"if" is not supported: ${NOT_RUN}`],
    ['X = " a ".strip()', 1, 10, `an attribute or method of a value is not supported: ${NOT_RUN}`],
    ['X, Y = "a", "b"', 1, 2, `a tuple is not supported: ${NOT_RUN}`],
    ['X: str = "a"', 1, 2, `a type annotation is not supported: ${NOT_RUN}`],
    ['X -= ["a"]', 1, 3, `the operator "-=" is not supported: ${NOT_RUN}`],
    ['X = lambda: 1', 1, 5, `"lambda" is not supported: ${NOT_RUN}`],
    ['prefix_rule(*ARGS)', 1, 13, `unpacking arguments with "*" is not supported: ${NOT_RUN}`],
    [
      'X = prefix_rule(pattern=["a"])',
      1,
      5,
      `prefix_rule(...) inside an expression (call it as a statement of its own) is not supported: ${NOT_RUN}`,
    ],
    ['prefix_rule = 1', 1, 1, '"prefix_rule" is a name Codex provides; assigning it is not supported'],
    ['X = 1 + ["a"]', 1, 7, '"+" cannot join a number and a list (Codex refuses it too)'],
    ['; prefix_rule(pattern=["a"])', 1, 1, 'expected a string or a list, found ";"'],
    [
      'X = "{}"\nprefix_rule(pattern=[f"{X!r}"])',
      2,
      22,
      `the conversion "!r" in an f-string is not supported: ${NOT_RUN}`,
    ],
    ['X = ["a"]\nprefix_rule(pattern=[f"{X}"])', 2, 22, `putting a list in an f-string is not supported: ${NOT_RUN}`],
    ['prefix_rule(pattern=[f"{a b}"])', 1, 22, '"{a b}" in an f-string must hold one name'],
    ['prefix_rule(pattern=["a\x01b"])\x0c', 1, 29, 'the character U+000C cannot appear outside a string'],
    [
      'A = ["a"]\n' + 'A += A\n'.repeat(25),
      20,
      1,
      'this file builds more than 1,000,000 list items and characters with + and calls',
    ],
    [
      'S = "ab"\n' + 'S = S + S\n'.repeat(25),
      19,
      7,
      'this file builds more than 1,000,000 list items and characters with + and calls',
    ],
    ['A = []\nA += [A]\nprefix_rule(pattern = A)', 3, 13, 'values are nested more than 64 deep'],
    [`X = ${'['.repeat(100)}${']'.repeat(100)}`, 1, 69, 'values are nested more than 64 deep'],
    ['prefix_rule(pattern=GIT)', 1, 21, '"GIT" is not assigned before this line (Codex refuses it too)'],
    ['GIT = "git"\nprefix_rule(pattern=GIT)', 2, 21, 'pattern must be a list'],
    ['ALTS = []\nprefix_rule(pattern=["git", ALTS])', 1, 8, 'pattern alternatives cannot be empty'],
    ['prefix_rule(pattern=["a"], decision=1)', 1, 37, 'decision must be a string, not a number'],
    [
      'prefix_rule(pattern=["a"], match=None)',
      1,
      34,
      'match must be a list of examples, not None (Codex refuses None too; leave an optional argument out instead)',
    ],
    ['prefix_rule(pattern=[f"{x}"])', 1, 22, '"x" is not assigned before this line (Codex refuses it too)'],
    ['prefix_rule(pattern=["git", [["push"]]])', 1, 30, 'a pattern alternative must be a string, not a list'],
    [
      'prefix_rule(pattern=["git", "push"], match=["git status"])',
      1,
      45,
      'the match example "git status" does not match this rule',
    ],
    [
      'prefix_rule(\n  pattern=["git"],\n  not_match=[\n    "git push",\n  ],\n)',
      4,
      5,
      'the not_match example "git push" matches this rule',
    ],
    ['prefix_rule(pattern=["git"], match=["\'open"])', 1, 37, 'the match example has invalid shell quoting'],
    ['prefix_rule(pattern=["git"], match=[[]])', 1, 37, 'a match example cannot be empty'],
    ['prefix_rule(decision="allow")', 1, 1, 'prefix_rule needs a pattern'],
    ['prefix_rule(pattern=[])', 1, 21, 'pattern cannot be empty'],
    ['prefix_rule(pattern="git")', 1, 21, 'pattern must be a list'],
    ['prefix_rule(pattern=["git", []])', 1, 29, 'pattern alternatives cannot be empty'],
    [
      'prefix_rule(pattern=["git"], decision="deny")',
      1,
      39,
      'decision must be one of allow, prompt, forbidden, found "deny"',
    ],
    ['prefix_rule(pattern=["git"], justification=" ")', 1, 44, 'justification cannot be empty'],
    [
      'prefix_rule(pattern=["git"], reviewer="user")',
      1,
      30,
      'prefix_rule has no argument "reviewer" (it takes pattern, decision, match, not_match, justification)',
    ],
    ['prefix_rule(pattern=["a"], pattern=["b"])', 1, 28, 'argument "pattern" is given twice'],
    ['prefix_rule(decision="allow", ["git"])', 1, 31, 'a positional argument cannot follow a keyword argument'],
    ['prefix_rule(["a"], "allow", [], [], "j", "extra")', 1, 42, 'prefix_rule takes at most 5 positional arguments'],
    [
      'prefix_rule(pattern=["git"]) prefix_rule(pattern=["ls"])',
      1,
      30,
      'expected the end of the statement, found "prefix_rule"',
    ],
    ['prefix_rule(pattern=["git"]', 1, 28, 'expected "," or ")", found the end of the file'],
    ['prefix_rule(pattern=["git)', 1, 22, 'string is not closed'],
  ] as const)('%j: line %i, column %i', (text, line, column, detail) => {
    const error = refusal(text);
    expect(error).toMatchObject({ code: 'SHELL_RULES_INVALID', sourceName: 'team.rules', line, column, detail });
    expect(error.message).toBe(`team.rules:${line}:${column}: ${detail}`);
  });
});
