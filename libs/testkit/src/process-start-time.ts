import { readFileSync } from 'node:fs';

/**
 * The kernel's start time of a process (field 22 of /proc/PID/stat), or
 * undefined when the process is gone. Pairing a PID with it lets the reaper
 * kill by PID without ever hitting a process that reused the PID.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: split after its closing ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
