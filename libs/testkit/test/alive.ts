/** Whether a process with this pid exists (a zombie not yet reaped counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
