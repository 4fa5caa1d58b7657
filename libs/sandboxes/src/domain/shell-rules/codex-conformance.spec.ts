import { describe, expect, it } from 'vitest';
import { parseCodexRules } from './codex-rules';
import { ShellRulesError } from './shell-errors';
import type { CommandDecision, ShellDecision } from './shell-rule';
import { decide, sandboxOf, type Sandbox } from './test-builders';

// Codex's own cases, each row naming where it comes from:
//  - openai/codex codex-rs/execpolicy/tests/basic.rs (the test function named),
//    examples/example.codexpolicy, src/amend.rs (the lines Codex appends),
//    README.md (its "Matching semantics"), and .codex/rules/development.rules;
//  - the Starlark lexer Codex parses with (facebook/starlark-rust 0.13,
//    starlark_syntax/src/lexer.rs and lexer_tests.rs), for what a file may be.
// A command Codex finds no rule for goes to its heuristics; here it is allowed
// with no rule, so such a row expects UNMATCHED.

const UNMATCHED = { decision: 'allow', matched: false } as const;
const matched = (decision: ShellDecision) => ({ decision, matched: true });

// Codex compares names and paths only; it never looks at the files.
const NO_FILES = sandboxOf({});

function decided(files: string | readonly string[], line: string, sandbox: Sandbox = NO_FILES): CommandDecision {
  const rules = [files].flat().flatMap((text, index) => parseCodexRules(text, `file${index}.rules`));
  return decide(line, rules, sandbox);
}

function outcome(files: string | readonly string[], line: string, sandbox?: Sandbox) {
  const { decision, rule } = decided(files, line, sandbox);
  return { decision, matched: rule !== null };
}

function refusal(text: string): string {
  try {
    parseCodexRules(text, 'test.rules');
  } catch (error) {
    if (error instanceof ShellRulesError) return error.message;
    throw error;
  }
  throw new Error('the file was accepted');
}

const GIT_PROMPT = 'prefix_rule(pattern = ["git"], decision = "prompt")\n';

describe('decisions: what Codex decides, we decide', () => {
  it.each([
    // basic.rs basic_match
    ['prefix_rule(\n    pattern = ["git", "status"],\n)\n    ', 'git status', matched('allow')],
    // basic.rs justification_is_attached_to_forbidden_matches
    [
      'prefix_rule(\n    pattern = ["rm"],\n    decision = "forbidden",\n    justification = "destructive command",\n)\n',
      'rm -rf /some/important/folder',
      matched('forbidden'),
    ],
    // basic.rs justification_can_be_used_with_allow_decision
    [
      'prefix_rule(\n    pattern = ["ls"],\n    decision = "allow",\n    justification = "safe and commonly used",\n)\n',
      'ls -l',
      matched('allow'),
    ],
    // basic.rs parses_multiple_policy_files
    [
      [
        'prefix_rule(\n    pattern = ["git"],\n    decision = "prompt",\n)\n',
        'prefix_rule(pattern = ["git", "commit"], decision = "forbidden")',
      ],
      'git status',
      matched('prompt'),
    ],
    [
      [
        'prefix_rule(\n    pattern = ["git"],\n    decision = "prompt",\n)\n',
        'prefix_rule(pattern = ["git", "commit"], decision = "forbidden")',
      ],
      'git commit -m hi',
      matched('forbidden'),
    ],
    // basic.rs only_first_token_alias_expands_to_multiple_rules
    ['prefix_rule(\n    pattern = [["bash", "sh"], ["-c", "-l"]],\n)\n', 'bash -c echo hi', matched('allow')],
    ['prefix_rule(\n    pattern = [["bash", "sh"], ["-c", "-l"]],\n)\n', 'sh -l echo hi', matched('allow')],
    // basic.rs tail_aliases_are_not_cartesian_expanded
    [
      'prefix_rule(\n    pattern = ["npm", ["i", "install"], ["--legacy-peer-deps", "--no-save"]],\n)\n',
      'npm i --legacy-peer-deps',
      matched('allow'),
    ],
    [
      'prefix_rule(\n    pattern = ["npm", ["i", "install"], ["--legacy-peer-deps", "--no-save"]],\n)\n',
      'npm install --no-save leftpad',
      matched('allow'),
    ],
    // basic.rs match_and_not_match_examples_are_enforced
    [
      'prefix_rule(\n    pattern = ["git", "status"],\n    match = [["git", "status"], "git status"],\n    not_match = [\n        ["git", "--config", "color.status=always", "status"],\n        "git --config color.status=always status",\n    ],\n)\n',
      'git --config color.status=always status',
      UNMATCHED,
    ],
    // basic.rs strictest_decision_wins_across_matches
    [
      'prefix_rule(\n    pattern = ["git"],\n    decision = "prompt",\n)\nprefix_rule(\n    pattern = ["git", "commit"],\n    decision = "forbidden",\n)\n',
      'git commit -m hi',
      matched('forbidden'),
    ],
    // basic.rs strictest_decision_across_multiple_commands (check_multiple: two commands of one line)
    [
      'prefix_rule(\n    pattern = ["git"],\n    decision = "prompt",\n)\nprefix_rule(\n    pattern = ["git", "commit"],\n    decision = "forbidden",\n)\n',
      'git status && git commit -m hi',
      matched('forbidden'),
    ],
    // basic.rs heuristics_match_is_returned_when_no_policy_matches
    ['', 'python', UNMATCHED],
    // basic.rs host_executable_resolution_uses_basename_rule_when_allowed
    [
      'prefix_rule(pattern = ["git", "status"], decision = "prompt")\nhost_executable(name = "git", paths = ["/usr/bin/git"])\n',
      '/usr/bin/git status',
      matched('prompt'),
    ],
    // basic.rs host_executable_resolution_respects_explicit_empty_allowlist
    [GIT_PROMPT + 'host_executable(name = "git", paths = [])\n', '/usr/bin/git status', UNMATCHED],
    // basic.rs host_executable_resolution_ignores_path_not_in_allowlist
    [
      GIT_PROMPT + 'host_executable(name = "git", paths = ["/usr/bin/git"])\n',
      '/opt/homebrew/bin/git status',
      UNMATCHED,
    ],
    // basic.rs host_executable_resolution_falls_back_without_mapping
    [GIT_PROMPT, '/usr/bin/git status', matched('prompt')],
    // basic.rs host_executable_resolution_does_not_override_exact_match: the exact path rule decides alone
    [
      'prefix_rule(pattern = ["/usr/bin/git"], decision = "allow")\n' +
        GIT_PROMPT +
        'host_executable(name = "git", paths = ["/usr/bin/git"])\n',
      '/usr/bin/git status',
      matched('allow'),
    ],
    // basic.rs host_executable_last_definition_wins (its two files as one: the later call wins)
    [
      GIT_PROMPT +
        'host_executable(name = "git", paths = ["/usr/bin/git"])\nhost_executable(name = "git", paths = ["/opt/homebrew/bin/git"])\n',
      '/usr/bin/git status',
      UNMATCHED,
    ],
    [
      GIT_PROMPT +
        'host_executable(name = "git", paths = ["/usr/bin/git"])\nhost_executable(name = "git", paths = ["/opt/homebrew/bin/git"])\n',
      '/opt/homebrew/bin/git status',
      matched('prompt'),
    ],
    // README.md: with the fallback, `/usr/bin/git status` only matches a rule for `/usr/bin/git` before `git`
    ['prefix_rule(pattern = ["/usr/bin/git"], decision = "forbidden")\n', '/usr/bin/git status', matched('forbidden')],
    ['prefix_rule(pattern = ["/usr/bin/git"], decision = "forbidden")\n', '/usr/local/bin/git status', UNMATCHED],
    // basic.rs append_allow_prefix_rule_dedupes_existing_rule: the line Codex appends
    ['prefix_rule(pattern=["python3"], decision="allow")\n', 'python3 -V', matched('allow')],
    // amend.rs appends_rule_without_duplicate_newline, and a network_rule that allows (appends_network_rule_and_creates_directories)
    [
      'prefix_rule(pattern=["ls"], decision="allow")\nprefix_rule(pattern=["echo", "Hello, world!"], decision="allow")\nnetwork_rule(host="api.example.com", protocol="https", decision="allow", justification="Allow API calls")\n',
      "echo 'Hello, world!' again",
      matched('allow'),
    ],
  ] as const)('%j, %j', (files, line, expected) => {
    expect(outcome(files, line)).toEqual(expected);
  });

  it('keeps the justification: basic.rs justification_is_attached_to_forbidden_matches', () => {
    const text = 'prefix_rule(pattern = ["rm"], decision = "forbidden", justification = "destructive command")';
    expect(decided(text, 'rm -rf /some/important/folder').reason).toBe(
      'rm -rf /some/important/folder: forbidden by rule "rm" (file0.rules line 1): destructive command',
    );
  });

  it('reads what basic.rs reads: one rule per first-token alternative, later alternatives kept, paths deduplicated', () => {
    // only_first_token_alias_expands_to_multiple_rules
    expect(parseCodexRules('prefix_rule(\n    pattern = [["bash", "sh"], ["-c", "-l"]],\n)\n')).toEqual([
      { program: 'bash', args: [['-c', '-l']], decision: 'allow', source: '.rules line 1' },
      { program: 'sh', args: [['-c', '-l']], decision: 'allow', source: '.rules line 1' },
    ]);
    // parses_host_executable_paths, with a rule for git to carry them
    const [git] = parseCodexRules(
      'host_executable(\n    name = "git",\n    paths = [\n        "/opt/homebrew/bin/git",\n        "/usr/bin/git",\n        "/usr/bin/git",\n    ],\n)\nprefix_rule(pattern = ["git"])\n',
    );
    expect(git!.paths).toEqual(['/opt/homebrew/bin/git', '/usr/bin/git']);
  });

  it("loads Codex's example policy and its repository's development rules, and decides by them", () => {
    // examples/example.codexpolicy
    const example = `
# Example policy to illustrate syntax; not comprehensive and not recommended for actual use.

prefix_rule(
    pattern = ["git", "reset", "--hard"],
    decision = "forbidden",
    justification = "destructive operation",
    match = [
        ["git", "reset", "--hard"],
    ],
    not_match = [
        ["git", "reset", "--keep"],
        "git reset --merge",
    ],
)

prefix_rule(
    pattern = ["ls"],
    match = [
        ["ls"],
        ["ls", "-l"],
        ["ls", "-a", "."],
    ],
)

prefix_rule(
    pattern = ["cp"],
    decision = "prompt",
    match = [
        ["cp", "foo", "bar"],
        "cp -r src dest",
    ],
)

prefix_rule(
    pattern = ["head"],
    match = [
        ["head", "README.md"],
        ["head", "-n", "5", "CHANGELOG.md"],
    ],
    not_match = [
        ["hea", "-n", "1,5p", "CHANGELOG.md"],
    ],
)
`;
    expect(outcome(example, 'git reset --hard HEAD~1')).toEqual(matched('forbidden'));
    expect(outcome(example, 'git reset --keep')).toEqual(UNMATCHED);
    expect(outcome(example, 'cp -r src dest')).toEqual(matched('prompt'));
    expect(outcome(example, 'ls -a .')).toEqual(matched('allow'));
    // .codex/rules/development.rules (two of its rules): triple-quoted justifications
    const development = `# Shared rules only allow commands that are generally safe for every project
# developer.

prefix_rule(
    pattern = [
        "just",
        [
            "fmt",
            "fmt-check",
            "test",
        ],
    ],
    decision = "allow",
    justification = """
Needed: host caches or nested sandbox capabilities.
Safe: fixed non-publishing recipes only operate on the trusted checkout.
""",
)

# Cargo accepts \`--manifest-path\`, so these rules may target manifests outside
# this checkout. That flexibility is an accepted tradeoff for development.
prefix_rule(
    pattern = ["cargo", ["build", "check", "clippy", "test"]],
    decision = "allow",
    justification = """
Needed: Cargo uses host registry, Git, and cache state.
Safe: these non-installing subcommands are standard development operations.
""",
)
`;
    expect(decided(development, 'just fmt')).toMatchObject({
      decision: 'allow',
      rule: {
        justification:
          '\nNeeded: host caches or nested sandbox capabilities.\nSafe: fixed non-publishing recipes only operate on the trusted checkout.\n',
      },
    });
    expect(outcome(development, 'cargo publish')).toEqual(UNMATCHED);
  });
});

describe('refusals: what Codex refuses, we refuse', () => {
  it.each([
    // basic.rs justification_cannot_be_empty
    [
      'prefix_rule(\n    pattern = ["ls"],\n    decision = "prompt",\n    justification = "   ",\n)\n',
      'test.rules:4:21: justification cannot be empty',
    ],
    // basic.rs host_executable_rejects_non_absolute_path
    [
      'host_executable(name = "git", paths = ["git"])',
      'test.rules:1:40: host_executable paths must be absolute (got git)',
    ],
    // basic.rs host_executable_rejects_name_with_path_separator
    [
      'host_executable(name = "/usr/bin/git", paths = ["/usr/bin/git"])',
      'test.rules:1:24: host_executable name must be a bare executable name (got /usr/bin/git)',
    ],
    // basic.rs host_executable_rejects_path_with_wrong_basename
    [
      'host_executable(name = "git", paths = ["/usr/bin/rg"])',
      'test.rules:1:40: host_executable path `/usr/bin/rg` must have basename `git`',
    ],
    // basic.rs network_rule_rejects_wildcard_hosts
    [
      'network_rule(host="*", protocol="http", decision="allow")',
      'test.rules:1:19: network_rule host must be a specific host; wildcards are not allowed',
    ],
    // parser.rs prefix_rule: the decision must be allow, prompt or forbidden
    [
      'prefix_rule(pattern = ["git"], decision = "maybe")',
      'test.rules:1:43: decision must be one of allow, prompt, forbidden, found "maybe"',
    ],
    // parser.rs: an example the rule contradicts (validate_match_examples / validate_not_match_examples)
    [
      'prefix_rule(pattern = ["git", "status"], match = ["git stat"])',
      'test.rules:1:51: the match example "git stat" does not match this rule',
    ],
    // README.md matching semantics: the basename fallback is for absolute paths only, also for examples
    [
      'prefix_rule(pattern = ["git"], match = ["./git status"])',
      'test.rules:1:41: the match example "./git status" does not match this rule',
    ],
    [
      GIT_PROMPT +
        'prefix_rule(pattern = ["git", "log"], not_match = ["/opt/git log"])\nhost_executable(name = "git", paths = ["/usr/bin/git"])\nprefix_rule(pattern = ["git", "log"], match = ["/opt/git log"])',
      'test.rules:4:48: the match example "/opt/git log" does not match this rule',
    ],
    // starlark-rust (parse_args check_optional): None is not a string, so an explicit None is refused
    [
      'prefix_rule(pattern = ["ls"], decision = None)',
      'test.rules:1:42: decision must be a string, not None (Codex refuses None too; leave an optional argument out instead)',
    ],
    // starlark-rust lexer.rs: Token::Tabs outside a string is an error
    [
      'prefix_rule(pattern = ["ls"],\tdecision = "allow")',
      'test.rules:1:30: tabs are not allowed outside strings (Codex refuses them too); indent with spaces',
    ],
    [
      'prefix_rule(\n\tpattern = ["ls"],\n)',
      'test.rules:2:1: tabs are not allowed outside strings (Codex refuses them too); indent with spaces',
    ],
    // starlark-rust lexer.rs calculate_indent: an indented statement at the top of the file (Indent)
    [
      '  prefix_rule(pattern = ["ls"])',
      'test.rules:1:3: this line is indented, but a statement at the top of the file starts in column 1 (Codex refuses it too)',
    ],
    [
      'prefix_rule(pattern = ["ls"])\n    prefix_rule(pattern = ["cat"])',
      'test.rules:2:5: this line is indented, but a statement at the top of the file starts in column 1 (Codex refuses it too)',
    ],
    // starlark-rust lexer.rs: the string prefixes are r' r" f' f" fr' fr" only; R"…" is a name then a string
    [
      'prefix_rule(pattern = [R"ls"])',
      `test.rules:1:24: R"…" is not a string Codex's Starlark reads: its only string prefixes are r (raw), f and fr, in lower case`,
    ],
    [
      "prefix_rule(pattern = [b'ls'])",
      `test.rules:1:24: b'…' is not a string Codex's Starlark reads: its only string prefixes are r (raw), f and fr, in lower case`,
    ],
    // lexer_tests.rs test_string_escape (string_escape.fail.golden)
    [
      "prefix_rule(pattern = ['more \\xTZ'])",
      'test.rules:1:30: invalid string escape sequence \\x: \\x takes exactly 2 hex digits',
    ],
    [
      "prefix_rule(pattern = ['more \\UFFFFFFFF overflows'])",
      'test.rules:1:30: invalid string escape sequence \\UFFFFFFFF: U+FFFFFFFF is not a Unicode character',
    ],
    [
      "prefix_rule(pattern = ['more \\x0yabc'])",
      'test.rules:1:30: invalid string escape sequence \\x0: \\x takes exactly 2 hex digits',
    ],
    // lexer.rs escape_char: \u of a lone surrogate is not a char
    [
      "prefix_rule(pattern = ['\\ud800'])",
      'test.rules:1:25: invalid string escape sequence \\ud800: U+D800 is not a Unicode character',
    ],
    // lexer_tests.rs test_string_lit (string_lit.fail.golden): a line break in a one-line string, and no closing quote
    ["prefix_rule(pattern = ['a\n'])", 'test.rules:1:24: string is not closed'],
    ['prefix_rule(pattern = [r"', 'test.rules:1:24: string is not closed'],
    // lexer.rs Token::Reserved
    [
      'import = ["ls"]',
      'test.rules:1:1: "import" is a reserved word in Starlark and cannot be used (Codex refuses it too)',
    ],
    // a name used before it is given a value
    [
      'prefix_rule(pattern = SHELLS)\nSHELLS = ["bash"]',
      'test.rules:1:23: "SHELLS" is not assigned before this line (Codex refuses it too)',
    ],
    // Starlark has no implicit concatenation of strings side by side
    [
      'prefix_rule(pattern = ["git" "status"])',
      'test.rules:1:30: two strings side by side are not joined in Starlark: put "+" between them',
    ],
    // `+` of a list and a string is a type error in Starlark
    [
      'prefix_rule(pattern = ["git"] + "status")',
      'test.rules:1:31: "+" cannot join a list and a string (Codex refuses it too)',
    ],
  ] as const)('%j', (text, message) => {
    expect(refusal(text)).toBe(message);
  });
});

describe("strings: decoded as Codex's Starlark decodes them", () => {
  const read = (literals: string) => parseCodexRules(`prefix_rule(pattern = ["x", ${literals}])`)[0]!.args;

  it.each([
    // lexer_tests.rs test_string_lit
    [
      `'123', "123", '', "", '\\'', "\\"", '"', "'", '\\n', '\\w'`,
      ['123', '123', '', '', "'", '"', '"', "'", '\n', '\\w'],
    ],
    // lexer_tests.rs test_string_lit, multiline strings
    [`'''''', '''\\n''', '''\n''', """""", """\\n""", """\n"""`, ['', '\n', '\n', '', '\n', '\n']],
    // lexer_tests.rs test_string_lit, raw strings: a backslash before a quote is dropped, any other kept
    [`r'', r"", r'\\'', r"\\"", r'"', r"'", r'\\n'`, ['', '', "'", '"', '"', "'", '\\n']],
    // lexer_tests.rs test_string_escape (string_escape.golden): octal of 1 to 3 digits, \x of exactly 2
    [`'\\0\\0\\1n', '\\0\\00\\000\\0000', '\\x000', '\\372x'`, ['\0\0\x01n', '\0\0\0\x000', '\x000', 'úx']],
    // lexer_tests.rs test_lexer_multiline_triple: a backslash before a line break joins the lines
    [`"""A \\\n    B \\\n    C \\\n    """`, ['A     B     C     ']],
  ] as const)('%s', (literals, expected) => {
    expect(read(literals)).toEqual(expected);
  });

  it("reads escapes, unicode and carriage returns as lexer.rs's escape does", () => {
    expect(read(`'\\a\\b\\f\\v\\t\\r', '\\u00e9\\U0001F600'`)).toEqual(['\x07\b\f\v\t\r', 'é😀']);
    expect(read(`"""a\r\nb"""`)).toEqual(['a\nb']);
    // a file with Windows line ends loads as the same file
    expect(parseCodexRules('X = ["ls"]\r\nprefix_rule(\r\n  pattern = X,\r\n)\r\n')).toHaveLength(1);
  });

  it('reads an f-string of names, as Dialect::Extended with enable_f_strings does', () => {
    expect(parseCodexRules('TOOL = "git"\nprefix_rule(pattern = [f"{TOOL}", f"{{x}}-{ TOOL!s}"])')).toMatchObject([
      { program: 'git', args: ['{x}-git'] },
    ]);
  });
});

describe('where we differ from Codex, on purpose (docs/shell-rules.md lists each)', () => {
  const rm = 'prefix_rule(pattern = ["rm"], decision = "forbidden")\n';

  it('reads inside shell code that Codex checks whole, as its argv', () => {
    // Codex parses `bash -lc` into commands only when it is plain words joined by && || ; |;
    // with a redirection it checks ["bash", "-lc", "…"], which no rule names
    expect(outcome(rm, "bash -lc 'rm -rf / > /dev/null'")).toEqual(matched('forbidden'));
  });

  it('a relative path ending in a rule program is that program', () => {
    // Codex: the basename fallback is for absolute paths only, so `./rm` goes to its heuristics
    expect(outcome(rm, './rm -rf /')).toEqual(matched('forbidden'));
    expect(outcome(GIT_PROMPT + 'host_executable(name = "git", paths = ["/usr/bin/git"])', './git status')).toEqual(
      UNMATCHED,
    );
  });

  it('a name and a path the sandbox resolves to the same file are one program', () => {
    // Codex: `git` and a rule for `/usr/bin/git` are different strings
    const sandbox = sandboxOf({ git: '/usr/bin/git', '/usr/bin/git': '/usr/bin/git', '/bin/git': '/usr/bin/git' });
    const byPath = 'prefix_rule(pattern = ["/usr/bin/git"], decision = "prompt")\n';
    expect(outcome(byPath, 'git status', sandbox)).toEqual(matched('prompt'));
    // Codex: /bin/git is not among the host paths, so it goes to its heuristics
    const listed = GIT_PROMPT + 'host_executable(name = "git", paths = ["/usr/bin/git"])';
    expect(outcome(listed, '/bin/git status', sandbox)).toEqual(matched('prompt'));
  });

  it.each([
    // basic.rs network_rules_compile_into_domain_lists: Codex keeps per-host lists; a sandbox's network is all or nothing
    [
      'network_rule(host = "google.com", protocol = "http", decision = "allow")\nnetwork_rule(host = "blocked.example.com", protocol = "https", decision = "deny")',
      'test.rules:2:1: network_rule(decision="deny") cannot be applied here: a sandbox reaches the network as a whole or not at all (its network setting, none or egress), never host by host, so this rule would not stop anything; remove it, or give the sandbox network none',
    ],
    [
      'network_rule(host = "prompt-only.example.com", protocol = "https", decision = "prompt")',
      'test.rules:1:1: network_rule(decision="prompt") cannot be applied here: a sandbox reaches the network as a whole or not at all (its network setting, none or egress), never host by host, so this rule would not stop anything; remove it, or give the sandbox network none',
    ],
    // README.md: `~/...` paths name the home of the machine Codex runs on
    [
      'host_executable(name = "az", paths = ["~/.openai/bin/az"])',
      'test.rules:1:39: host_executable path ~/.openai/bin/az is under the home directory of the machine Codex runs on; a sandbox has its own, so write the absolute path',
    ],
    // Codex runs the file; here it is only read
    [
      'def shells():\n    return ["bash"]',
      'test.rules:1:1: "def" is not supported: a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls',
    ],
    [
      'for tool in ["rm", "dd"]:\n    prefix_rule(pattern = [tool], decision = "forbidden")',
      'test.rules:1:1: "for" is not supported: a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls',
    ],
    [
      'load("//shared.star", "SHELLS")',
      'test.rules:1:1: "load" is not supported: a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls',
    ],
    [
      'TOOLS = ["rm"] * 2',
      'test.rules:1:16: the operator "*" is not supported: a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls',
    ],
    [
      'prefix_rule(pattern = [str("rm")])',
      'test.rules:1:24: calling str(...) is not supported: a .rules file is read here, never run, so it may hold only strings, lists, names assigned to them, + between them, and prefix_rule, host_executable and network_rule calls',
    ],
  ] as const)('%j is refused', (text, message) => {
    expect(refusal(text)).toBe(message);
  });
});
