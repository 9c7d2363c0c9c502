import { spawn } from 'node:child_process';

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (killed after `timeoutMs`), without blocking the event loop. */
export function runCommand(
  command: string,
  args: readonly string[],
  { timeoutMs = 120_000, env }: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawn(command, [...args], {
      env: env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', (error) => resolve({ code: null, stdout, stderr: `${stderr}${error.message}` }));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Like `runCommand`, but a non-zero exit throws with the command's output. */
export async function mustRun(
  command: string,
  args: readonly string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const result = await runCommand(command, args, options);
  if (result.code !== 0)
    throw new Error(
      `${command} ${args.join(' ')} exited with ${String(result.code)}:\n${result.stderr.slice(-4000)}\n${result.stdout.slice(-4000)}`,
    );
  return result.stdout;
}

/** Whether a Docker engine answers (the CLI present and the daemon up). */
export async function dockerEngineAnswers(): Promise<boolean> {
  const result = await runCommand('docker', ['info', '--format', '{{.ServerVersion}}'], { timeoutMs: 15_000 });
  return result.code === 0 && result.stdout.trim() !== '';
}
