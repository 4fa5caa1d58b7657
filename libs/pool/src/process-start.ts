import { readFileSync } from 'node:fs';

/**
 * The fields of `/proc/<pid>/stat` after the command name, state first (Linux).
 * The name is cut at the last ") ": it may itself hold spaces and parentheses.
 * Throws when the process is gone or there is no /proc.
 */
export function procStat(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
}

/**
 * A process's start time in clock ticks since boot: with its pid it names one
 * process, where a pid alone may have been reused. Undefined once the process
 * is gone or a zombie; '' for a live process where /proc cannot tell.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const fields = procStat(pid);
    return fields[0] === 'Z' || fields[0] === 'X' ? undefined : fields[19];
  } catch {
    try {
      process.kill(pid, 0);
      return ''; // alive, start time unknown (no /proc)
    } catch {
      return undefined;
    }
  }
}
