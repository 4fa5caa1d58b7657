import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { Copy, DockerfileParser, JSONInstruction, Label, type Dockerfile, type Instruction } from 'dockerfile-ast';
import { validate } from 'dockerfile-utils';

/**
 * A Dockerfile as the tests read it: parsed by dockerfile-ast (the parser of
 * the Docker language server), split into its stages, with the instructions
 * the image's behaviour depends on pulled out.
 */

export interface DockerfileCopy {
  /** the stage it copies from; undefined: the build context */
  from: string | undefined;
  sources: string[];
  /** every flag by name (--chmod, --chown, --from) */
  flags: Record<string, string>;
  /** absolute, resolved against the WORKDIR in force */
  destination: string;
}

export class Stage {
  constructor(
    readonly name: string | undefined,
    readonly image: string,
    readonly instructions: Instruction[],
  ) {}

  keyword(keyword: string): Instruction[] {
    return this.instructions.filter((instruction) => instruction.getKeyword() === keyword);
  }

  last(keyword: string): Instruction | undefined {
    return this.keyword(keyword).at(-1);
  }

  /** The exec (JSON) form of CMD or ENTRYPOINT; undefined when absent or in shell form. */
  execForm(keyword: 'CMD' | 'ENTRYPOINT'): string[] | undefined {
    const instruction = this.last(keyword);
    if (!(instruction instanceof JSONInstruction)) return undefined;
    const strings = instruction.getJSONStrings();
    return strings.length > 0 ? strings.map((s) => s.getJSONValue()) : undefined;
  }

  labels(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const label of this.instructions.filter((i): i is Label => i instanceof Label)) {
      for (const property of label.getProperties()) out[property.getName()] = property.getValue() ?? '';
    }
    return out;
  }

  /** Every RUN's text, for what a stage installs or runs. */
  runs(): string[] {
    return this.keyword('RUN').map((run) => run.getArgumentsContent() ?? '');
  }

  copies(): DockerfileCopy[] {
    const out: DockerfileCopy[] = [];
    let workdir = '/';
    for (const instruction of this.instructions) {
      if (instruction.getKeyword() === 'WORKDIR')
        workdir = posix.resolve(workdir, instruction.getArguments()[0]!.getValue());
      if (!(instruction instanceof Copy)) continue;
      const values = instruction.getArguments().map((argument) => argument.getValue());
      out.push({
        // getFromFlag() misses --from after another flag
        from:
          instruction
            .getFlags()
            .find((flag) => flag.getName() === 'from')
            ?.getValue() ?? undefined,
        flags: Object.fromEntries(instruction.getFlags().map((flag) => [flag.getName(), flag.getValue() ?? ''])),
        sources: values.slice(0, -1),
        destination: posix.resolve(workdir, values.at(-1)!),
      });
    }
    return out;
  }

  /** WORKDIR at the end of the stage: where relative paths of its RUN and CMD point. */
  workdir(): string {
    return this.keyword('WORKDIR').reduce(
      (dir, instruction) => posix.resolve(dir, instruction.getArguments()[0]!.getValue()),
      '/',
    );
  }
}

export class ParsedDockerfile {
  readonly text: string;
  readonly dockerfile: Dockerfile;
  readonly stages: Stage[];

  constructor(readonly path: string) {
    this.text = readFileSync(path, 'utf8');
    this.dockerfile = DockerfileParser.parse(this.text);
    const froms = this.dockerfile.getFROMs();
    const instructions = this.dockerfile.getInstructions();
    this.stages = froms.map((from, index) => {
      const start = from.getRange().start.line;
      const end = froms[index + 1]?.getRange().start.line ?? Number.POSITIVE_INFINITY;
      const own = instructions.filter((instruction) => {
        const line = instruction.getRange().start.line;
        return line > start && line < end;
      });
      return new Stage(from.getBuildStage() ?? undefined, from.getImage() ?? '', own);
    });
  }

  /** What the Docker language server's linter reports: unknown flags, bad durations, ports, missing arguments… */
  problems(): string[] {
    return validate(this.text).map((diagnostic) => `line ${diagnostic.range.start.line + 1}: ${diagnostic.message}`);
  }

  get final(): Stage {
    return this.stages.at(-1)!;
  }

  stage(name: string): Stage {
    const stage = this.stages.find((s) => s.name === name);
    if (!stage) throw new Error(`${this.path} has no stage ${name}`);
    return stage;
  }

  /** An ARG's default: in the stage if given, else before the first FROM. */
  argDefault(name: string, stage?: Stage): string | undefined {
    const scope: Instruction[] = stage ? stage.keyword('ARG') : this.dockerfile.getInitialARGs();
    for (const arg of scope) {
      const [key, value] = (arg.getArguments()[0]?.getValue() ?? '').split('=', 2);
      if (key === name) return value;
    }
    return undefined;
  }

  /** ${NAME} in a FROM or LABEL, replaced by the ARG defaults before the first FROM and in the stage. */
  expand(value: string, stage?: Stage): string {
    return value.replace(
      /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g,
      (_, name: string) => (stage && this.argDefault(name, stage)) ?? this.argDefault(name) ?? '',
    );
  }
}

/**
 * `.dockerignore` as Docker reads the simple patterns this repository uses:
 * a path, or a `*` glob within one path segment, matching the path or any
 * parent of it. Exceptions (`!`) and `**` are refused rather than misread.
 */
export function dockerIgnored(patterns: string, path: string): string | undefined {
  const rules = patterns
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  for (const rule of rules) {
    if (rule.startsWith('!') || rule.includes('**'))
      throw new Error(`.dockerignore rule ${rule}: the tests read only plain paths and * globs`);
    const pattern = new RegExp(
      `^${rule
        .replace(/^\/+|\/+$/g, '')
        .split('*')
        .map(escapeRegExp)
        .join('[^/]*')}(/.*)?$`,
    );
    if (pattern.test(posix.normalize(path).replace(/^\.\/|\/$/g, ''))) return rule;
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
