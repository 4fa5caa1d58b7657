import { describe, expect, it } from 'vitest';
import { analyzeCommand } from './command-analysis';
import { decideCommand, programsToResolve } from './command-decision';
import { decide, sandboxOf, shellRule } from './test-builders';

const rm = shellRule('rm', 'forbidden', { source: '.rules line 1' });

describe('matching a rule to a program', () => {
  it('a rule by name matches the program by any path or spelling that is the same file', () => {
    for (const command of ['rm x', '/bin/rm x', '/usr/bin/rm x', '\\rm x', '"/usr/bin/rm" x']) {
      expect(decide(command, [rm]), command).toMatchObject({ decision: 'forbidden', rule: rm });
    }
  });

  it('a rule by path matches the name that resolves to that file, and only that file', () => {
    const byPath = shellRule('/usr/bin/rm', 'forbidden');
    expect(decide('rm x', [byPath]).rule).toBe(byPath);
    expect(decide('/bin/rm x', [byPath]).rule).toBe(byPath);
    const elsewhere = sandboxOf({ rm: '/usr/local/bin/rm', '/usr/bin/rm': '/usr/bin/rm' });
    expect(decide('rm x', [byPath], elsewhere)).toMatchObject({ decision: 'allow', rule: null });
  });

  it('a name that links to the real file matches the rule naming either', () => {
    const sandbox = sandboxOf({ python3: '/usr/bin/python3.11', 'python3.11': '/usr/bin/python3.11' });
    expect(decide('python3.11 -c 1', [shellRule('python3', 'prompt')], sandbox).decision).toBe('prompt');
    expect(decide('python3 -c 1', [shellRule('python3.11', 'prompt')], sandbox).decision).toBe('prompt');
  });

  it('applets of one multi-call binary are told apart by the name they are called by', () => {
    const busybox = sandboxOf({ rm: '/bin/busybox', ls: '/bin/busybox', busybox: '/bin/busybox' });
    expect(decide('ls -l', [rm], busybox).decision).toBe('allow');
    expect(decide('busybox ls', [rm], busybox).decision).toBe('allow');
    expect(decide('rm x', [rm], busybox).decision).toBe('forbidden');
    expect(decide('busybox rm x', [rm], busybox).decision).toBe('forbidden');
  });

  it('a different program with a similar name is not matched', () => {
    expect(decide('rmdir x', [rm]).decision).toBe('allow');
    expect(decide('/usr/bin/rm2 x', [rm]).decision).toBe('allow');
  });

  it('a name missing from the resolved map counts as not found, and the literal name still matches', () => {
    const analysis = analyzeCommand('rm x');
    expect(decideCommand(analysis, [rm], new Map()).rule).toBe(rm);
    expect(decideCommand(analysis, [shellRule('/usr/bin/rm', 'forbidden')], new Map()).decision).toBe('allow');
  });
});

describe('the order Codex consults rules in: the exact program, then the basename fallback', () => {
  const exactAllow = shellRule('/usr/bin/git', 'allow');
  const namePrompt = shellRule('git', 'prompt');

  it('a rule for the exact path decides alone; the rule for its name is not consulted', () => {
    expect(decide('/usr/bin/git status', [namePrompt, exactAllow])).toMatchObject({
      decision: 'allow',
      rule: exactAllow,
    });
    expect(decide('/usr/bin/git status', [shellRule('/usr/bin/git push', 'allow'), namePrompt]).rule).toBe(namePrompt);
  });

  it('the rules found by resolving in the sandbox come after both', () => {
    const byPath = shellRule('/usr/bin/git', 'forbidden');
    const name = shellRule('git', 'allow');
    expect(decide('/bin/git status', [byPath, name])).toMatchObject({ decision: 'allow', rule: name });
    expect(decide('/bin/git status', [byPath])).toMatchObject({ decision: 'forbidden', rule: byPath });
  });

  it('an argument known only at run time that may make an exact rule match still goes to a person', () => {
    const exactPush = shellRule('/usr/bin/git push', 'forbidden');
    expect(decide('/usr/bin/git $SUB', [exactPush, shellRule('git', 'allow')])).toMatchObject({
      decision: 'prompt',
      rule: exactPush,
    });
  });

  it("host paths limit the fallback to those paths, for every rule of the name (Codex's host_executable)", () => {
    const listed = shellRule('git', 'prompt', { paths: ['/usr/bin/git'] });
    const other = shellRule('git push', 'forbidden');
    const nothing = sandboxOf({});
    expect(decide('/usr/bin/git push', [listed, other], nothing)).toMatchObject({ decision: 'forbidden', rule: other });
    expect(decide('/opt/git/bin/git push', [listed, other], nothing)).toMatchObject({ decision: 'allow', rule: null });
    expect(decide('./git push', [listed, other], nothing).decision).toBe('allow');
    expect(decide('wrap /opt/git/bin/git push', [listed, other], nothing).decision).toBe('allow');
    expect(decide('wrap /usr/bin/git push', [listed, other], nothing).decision).toBe('prompt');
  });
});

describe('matching the argument prefix', () => {
  const push = shellRule('git push', 'prompt');

  it('matches only that prefix', () => {
    expect(decide('git push origin main', [push]).rule).toBe(push);
    expect(decide('git push', [push]).rule).toBe(push);
    expect(decide('git status', [push])).toMatchObject({ decision: 'allow', rule: null });
    expect(decide('git', [push]).decision).toBe('allow');
    expect(decide('git --no-pager push', [push]).decision).toBe('allow');
  });

  it('compares arguments after quote removal', () => {
    expect(decide("git 'push' origin", [push]).rule).toBe(push);
    expect(decide('git pu\\sh', [push]).rule).toBe(push);
  });

  it('takes one of the alternatives at a position', () => {
    const remote = shellRule('git push|fetch', 'prompt');
    expect(decide('git fetch', [remote]).decision).toBe('prompt');
    expect(decide('git push', [remote]).decision).toBe('prompt');
    expect(decide('git pull', [remote]).decision).toBe('allow');
  });

  it('the strictest of the rules that match one command decides', () => {
    const git = shellRule('git', 'prompt');
    const commit = shellRule('git commit', 'forbidden');
    expect(decide('git commit -m hi', [git, commit]).rule).toBe(commit);
    expect(decide('git status', [git, commit]).rule).toBe(git);
  });
});

describe('deciding a command line', () => {
  const push = shellRule('git push', 'prompt');
  const ls = shellRule('ls', 'allow');

  it('the strictest decision over every command wins', () => {
    expect(decide('git push | rm x', [push, rm]).rule).toBe(rm);
    expect(decide('ls && git push', [push, ls]).rule).toBe(push);
    expect(decide('git push; git push --force', [push]).command).toEqual(['git', 'push']);
  });

  it('an allow rule says so, and a line no rule names is allowed', () => {
    expect(decide('ls -l | wc -l', [ls])).toMatchObject({
      decision: 'allow',
      rule: ls,
      reason: 'ls -l: allowed by rule "ls"',
    });
    expect(decide('wc -l', [ls])).toMatchObject({ decision: 'allow', rule: null, reason: 'wc -l: no rule names it' });
    expect(decide('', [ls])).toMatchObject({ decision: 'allow', rule: null, command: [] });
    expect(decide('X=1', [rm]).decision).toBe('allow');
  });

  it('gives a one-line reason that names the rule, where it came from and why', () => {
    const documented = shellRule('rm', 'forbidden', {
      source: 'team.rules line 4',
      justification: 'Use trash\ninstead.',
    });
    const { reason } = decide("rm -rf 'a\nb'", [documented]);
    expect(reason).toBe(`rm -rf 'a\\nb': forbidden by rule "rm" (team.rules line 4): Use trash instead.`);
    expect(decide('git "$(echo\npush)"', [shellRule('git push', 'forbidden')]).reason).toBe(
      'git "$(echo\\npush)": "$(echo\\npush)" is only known at run time and may make it match rule "git push" (forbidden), so a person decides',
    );
  });
});

describe('words only known at run time', () => {
  const push = shellRule('git push', 'forbidden');

  it.each([
    '$(echo rm) -rf /',
    '`echo rm` x',
    '$CMD',
    '${X}m -rf /',
    '"$@"',
    'r{m,} x',
    '/bin/r? x',
    '~/bin/rm x',
    'eval "$x"',
    'bash -c "$x"',
    'echo rm | bash',
    'source <(echo rm)',
    'sudo $X',
    'echo "${x@P}"',
  ])('%j is decided by a person when any rule is strict', (command) => {
    const decision = decide(command, [push]);
    expect(decision).toMatchObject({ decision: 'prompt', rule: null });
    expect(decision.reason).toContain('only known at run time');
  });

  it('is allowed when every rule allows', () => {
    expect(decide('$CMD x', [shellRule('ls', 'allow')])).toMatchObject({ decision: 'allow', rule: null });
    expect(decide('$CMD x', [])).toMatchObject({ decision: 'allow', rule: null });
  });

  it('an argument only known at run time where a strict rule needs one is decided by a person', () => {
    expect(decide('git $SUB origin', [push])).toMatchObject({ decision: 'prompt', rule: push });
    expect(decide('git "$SUB"', [shellRule('git push', 'prompt')]).decision).toBe('prompt');
    expect(decide('echo a | xargs git', [push]).decision).toBe('prompt');
    expect(decide('git $SUB', [push]).reason).toBe(
      'git $SUB: $SUB is only known at run time and may make it match rule "git push" (forbidden), so a person decides',
    );
  });

  it('an argument only known at run time after a prefix that already differs changes nothing', () => {
    expect(decide('git status $X', [push]).decision).toBe('allow');
    expect(decide('git push $X', [push]).decision).toBe('forbidden');
    expect(decide('git $X', [shellRule('git push', 'allow')]).decision).toBe('allow');
  });

  it('a certain forbidden match outranks a possible one', () => {
    expect(decide('git $X', [push, shellRule('git', 'forbidden')]).decision).toBe('forbidden');
  });
});

describe('a program the analysis does not know, given a program that has a rule', () => {
  it('is decided by a person when the argument names a program of a strict rule, by name or by path', () => {
    const sandbox = sandboxOf({
      rm: '/usr/bin/rm',
      './tools/rm-copy': '/usr/bin/rm',
      './tools/other': '/usr/bin/other',
    });
    for (const command of ['wrap rm x', 'wrap /bin/rm x', 'wrap ./tools/rm-copy x', 'timeout 5 wrap rm x']) {
      const decision = decide(command, [rm], sandbox);
      expect(decision, command).toMatchObject({ decision: 'prompt', rule: rm });
    }
    expect(decide('wrap ./tools/other x', [rm], sandbox).decision).toBe('allow');
    expect(decide('wrap rm x', [rm]).reason).toBe(
      'wrap rm x: wrap is not a program this analysis knows, and its argument rm is the program of rule "rm" (.rules line 1) (forbidden), so a person decides',
    );
  });

  it('needs the arguments after it to be able to match the rule', () => {
    const push = shellRule('git push', 'forbidden');
    expect(decide('wrap git push origin', [push])).toMatchObject({ decision: 'prompt', rule: push });
    expect(decide('wrap git $SUB', [push])).toMatchObject({ decision: 'prompt', rule: push });
    expect(decide('wrap git status', [push]).decision).toBe('allow');
  });

  it('is not decided by a rule that allows, nor for a program the analysis knows', () => {
    expect(decide('wrap ls', [shellRule('ls', 'allow')])).toMatchObject({ decision: 'allow', rule: null });
    expect(decide('echo rm; grep rm notes; git rm x; cat /usr/bin/rm', [rm]).decision).toBe('allow');
  });

  it('a forbidden program run directly still outranks the prompt', () => {
    expect(decide('wrap rm x; rm y', [rm])).toMatchObject({ decision: 'forbidden', command: ['rm', 'y'] });
  });
});

describe('programsToResolve', () => {
  it('lists each program written, at any depth, and each rule program, once', () => {
    const analysis = analyzeCommand('ls | sudo bash -c "rm x; /usr/bin/env ls" && $X');
    expect(programsToResolve(analysis, [rm, shellRule('/usr/bin/git', 'allow')])).toEqual([
      'ls',
      'sudo',
      'bash',
      'rm',
      '/usr/bin/env',
      '/usr/bin/git',
    ]);
  });

  it('lists the arguments of a program the analysis does not know, when a rule is strict', () => {
    const analysis = analyzeCommand('wrap -q ./tools/x $Y y; echo ./z');
    expect(programsToResolve(analysis, [rm])).toEqual(['wrap', 'echo', './tools/x', 'y', 'rm']);
    expect(programsToResolve(analysis, [shellRule('rm', 'allow')])).toEqual(['wrap', 'echo', 'rm']);
  });
});
