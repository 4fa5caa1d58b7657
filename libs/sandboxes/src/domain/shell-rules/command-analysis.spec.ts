import { describe, expect, it } from 'vitest';
import { analyzeCommand } from './command-analysis';
import { ShellSyntaxError } from './shell-errors';
import { decide, programsOf, shellRule } from './test-builders';

describe('analyzeCommand', () => {
  it('lists every simple command in the order written, with its argv after quote removal', () => {
    const analysis = analyzeCommand(`git log --format='%H %s' | head -n 1 && echo "done: $(date +%F)"`);
    expect(analysis.commands.map((command) => command.words)).toEqual([
      [
        { kind: 'static', value: 'git' },
        { kind: 'static', value: 'log' },
        { kind: 'static', value: '--format=%H %s' },
      ],
      [
        { kind: 'static', value: 'head' },
        { kind: 'static', value: '-n' },
        { kind: 'static', value: '1' },
      ],
      [
        { kind: 'static', value: 'echo' },
        { kind: 'dynamic', text: '"done: $(date +%F)"' },
      ],
      [
        { kind: 'static', value: 'date' },
        { kind: 'static', value: '+%F' },
      ],
    ]);
  });

  it('records what runs each command', () => {
    const analysis = analyzeCommand(`sudo -u app env A=1 bash -c 'eval "rm x"'`);
    expect(analysis.commands.map((command) => [command.words[0], command.via])).toEqual([
      [{ kind: 'static', value: 'sudo' }, []],
      [{ kind: 'static', value: 'env' }, ['sudo']],
      [{ kind: 'static', value: 'bash' }, ['sudo', 'env']],
      [{ kind: 'static', value: 'eval' }, ['sudo', 'env', 'bash -c']],
      [{ kind: 'static', value: 'rm' }, ['sudo', 'env', 'bash -c', 'eval']],
    ]);
  });

  it('reads an option it does not know both ways, so the command after it is never lost', () => {
    expect(programsOf('sudo --frobnicate rm x')).toEqual(['sudo', 'rm', 'x']);
    expect(programsOf('sudo -Z rm x')).toEqual(['sudo', 'rm', 'x']);
  });

  it('keeps the body of a function that is defined but not called', () => {
    expect(programsOf('cleanup() { rm -rf build; }')).toEqual(['rm']);
  });

  it('past the depth or number of commands it can check, the rest is unknown and a person decides', () => {
    const strict = [shellRule('rm', 'forbidden')];
    expect(decide(`${'eval '.repeat(12)}rm x`, strict).decision).toBe('forbidden');
    expect(decide(`${'eval '.repeat(20)}rm x`, strict).decision).toBe('prompt');
    expect(decide(`${'true; '.repeat(2_500)}ls`, strict)).toMatchObject({ decision: 'prompt', rule: null });
    expect(decide(`${'sudo -Z '.repeat(14)}ls`, strict).decision).toBe('prompt');
  });

  it('a line of assignments runs no program but its substitutions', () => {
    expect(programsOf('A=1 B=$(whoami)')).toEqual(['whoami']);
  });
});

describe('syntax bash would refuse', () => {
  it.each([
    "echo 'unterminated",
    'if true; then',
    'echo $(',
    'echo `ls',
    'rm x &&',
    '| rm x',
    'echo )',
    'fi',
    'case x in',
    'f() {',
    'echo ${',
    'echo $(if)',
    'echo "$(rm x"',
  ])('%j is refused with SHELL_SYNTAX_INVALID', (command) => {
    let error: unknown;
    try {
      analyzeCommand(command);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ShellSyntaxError);
    expect(error).toMatchObject({ code: 'SHELL_SYNTAX_INVALID', name: 'ShellSyntaxError' });
    expect((error as Error).message).toMatch(/^bash cannot parse this command: .+ \(line \d+, column \d+\)$/);
  });

  it('says where the error is', () => {
    expect(() => analyzeCommand("ls\necho 'oops")).toThrow('unterminated single quote (line 2, column 6)');
  });

  it('a string of code that does not parse is run by bash later, so it is decided as unknown, not refused', () => {
    const strict = [shellRule('rm', 'forbidden')];
    expect(decide("bash -c 'if'", strict)).toMatchObject({ decision: 'prompt', command: ['if'] });
    expect(decide("eval 'echo $('", strict).decision).toBe('prompt');
  });
});
