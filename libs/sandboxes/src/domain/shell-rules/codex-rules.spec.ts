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
    const [rule] = parseCodexRules(`prefix_rule(pattern=["a\\tb", r"c\\d", '''e"f''', "\\x41\\u00e9\\101", 'it\\'s'])`);
    expect(rule!.program).toBe('a\tb');
    expect(rule!.args).toEqual(['c\\d', 'e"f', 'AéA', "it's"]);
  });

  it('treats None as an argument left out', () => {
    expect(parseCodexRules(`prefix_rule(pattern=["ls"], decision=None, justification=None)`)).toEqual([
      { program: 'ls', args: [], decision: 'allow', source: '.rules line 1' },
    ]);
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

describe('a file Codex would refuse, or that is more than prefix rules, is refused with its line', () => {
  it.each([
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
    ['\n\nx = ["git"]', 3, 1, 'only prefix_rule(...) calls are allowed, found "x"'],
    ['load("//x.star", "y")', 1, 1, 'only prefix_rule(...) calls are allowed, found "load"'],
    [
      'network_rule(host="a.com", protocol="https", decision="allow")',
      1,
      1,
      'network_rule(...) is not supported in shell rules; only prefix_rule(...) is',
    ],
    [
      'host_executable(name="git", paths=["/usr/bin/git"])',
      1,
      1,
      'host_executable(...) is not supported in shell rules; only prefix_rule(...) is',
    ],
    [
      'prefix_rule(pattern=GIT)',
      1,
      21,
      'expected a string or a list, found the name "GIT" (variables and expressions are not supported)',
    ],
    ['prefix_rule(pattern=["a" + "b"])', 1, 26, 'expected "," or "]", found "+"'],
    ['prefix_rule(pattern=["a"], decision=1)', 1, 37, 'expected a string or a list, found "1"'],
    ['prefix_rule(pattern=[f"{x}"])', 1, 22, 'f-strings are not supported'],
    ['prefix_rule(decision="allow")', 1, 1, 'prefix_rule needs a pattern'],
    ['prefix_rule(pattern=[])', 1, 21, 'pattern cannot be empty'],
    ['prefix_rule(pattern="git")', 1, 21, 'pattern must be a list'],
    ['prefix_rule(pattern=["git", []])', 1, 29, 'pattern alternatives cannot be empty'],
    ['prefix_rule(pattern=["git", [["push"]]])', 1, 30, 'a pattern alternative must be a string'],
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
    ['prefix_rule(pattern=["g\\it"])', 1, 24, 'unknown escape \\i in a string'],
  ] as const)('%j: line %i, column %i', (text, line, column, detail) => {
    const error = refusal(text);
    expect(error).toMatchObject({ code: 'SHELL_RULES_INVALID', sourceName: 'team.rules', line, column, detail });
    expect(error.message).toBe(`team.rules:${line}:${column}: ${detail}`);
  });
});
