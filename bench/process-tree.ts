import { readdirSync, readFileSync } from 'node:fs';

/**
 * A process and everything below it, as Linux's /proc shows them (Linux only):
 * what a server costs is its whole tree (a proxy, its children, their
 * wrappers), not the one process a bench started.
 */
export function processTree(pid: number): number[] {
  const found = [pid];
  for (let at = 0; at < found.length; at++) {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${found[at]}/task`);
    } catch {
      continue; // gone meanwhile
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${found[at]}/task/${task}/children`, 'utf8');
        for (const child of children.split(' ').filter(Boolean)) found.push(Number(child));
      } catch {
        // gone meanwhile
      }
    }
  }
  return found;
}

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces), state first. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ: the unit of /proc's CPU times. */
const CLOCK_TICKS = 100;
const PAGE_KB = 4;

/** CPU time (user and system) the live processes of the tree have used so far, in ms. */
export function treeCpuMs(pid: number): number {
  let ticks = 0;
  for (const member of processTree(pid)) {
    const fields = statFields(member);
    if (fields) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / CLOCK_TICKS;
}

/** Resident memory of the tree's processes added up, in MiB (shared pages count once per process, as `ps` counts them). */
export function treeRssMb(pid: number): number {
  let pages = 0;
  for (const member of processTree(pid)) {
    const fields = statFields(member);
    if (fields) pages += Number(fields[21]);
  }
  return (pages * PAGE_KB) / 1024;
}

/** The command lines of the tree's processes, for telling which programs it runs. */
export function treeCommands(pid: number): string[] {
  return processTree(pid).flatMap((member) => {
    try {
      return [readFileSync(`/proc/${member}/cmdline`, 'utf8').split('\0').join(' ').trim()];
    } catch {
      return [];
    }
  });
}

/** The median of a few looks a second apart: a tree's resident memory once it stops moving much. */
export async function steadyTreeRssMb(pid: number): Promise<number> {
  const looks: number[] = [];
  for (let i = 0; i < 5; i++) {
    await new Promise((wait) => setTimeout(wait, 1000));
    looks.push(treeRssMb(pid));
  }
  return looks.sort((a, b) => a - b)[2]!;
}
