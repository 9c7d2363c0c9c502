import { describe, expect, it } from 'vitest';
import { checkLedger, parseLedger } from '../src/index.ts';

const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';

function check(lines: string[]): ReturnType<typeof checkLedger> {
  return checkLedger(parseLedger(lines.join('\n') + '\n'));
}

describe('the ledger check (a fencing-aware store)', () => {
  it('sequential runs with growing fences are clean', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/a ${T1} 10 1 beat 1`, `t/a ${T1} 10 1 end 1`, `t/a ${T2} 11 1 start 2`, `t/a ${T2} 11 1 end 2`]);
    expect(result.overlaps).toEqual([]);
    expect(result.fenceRegressions).toEqual([]);
    expect(result.duplicateCompletions).toEqual([]);
    expect([...result.ticksRun]).toEqual([`t/a ${T1}`, `t/a ${T2}`]);
  });

  it('a run that writes after a greater fence started is an overlap', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/a ${T2} 11 1 start 2`, `t/a ${T1} 10 1 beat 1`, `t/a ${T1} 10 1 beat 1`]);
    expect(result.overlaps).toEqual([{ schedule: 't/a', staleFence: 10, newerFence: 11, line: 3 }]);
  });

  it('a killed run that never writes again is no overlap, and other schedules do not interfere', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/b ${T1} 50 1 start 3`, `t/a ${T1} 12 2 start 2`, `t/b ${T1} 50 1 end 3`, `t/a ${T1} 12 2 end 2`]);
    expect(result.overlaps).toEqual([]);
    expect(result.duplicateCompletions).toEqual([]);
  });

  it('a tick completed again by a later attempt (its completion lost with the worker) is a re-run, not a duplicate', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/a ${T1} 10 1 end 1`, `t/a ${T1} 12 2 start 2`, `t/a ${T1} 12 2 end 2`]);
    expect(result.duplicateCompletions).toEqual([]);
    expect(result.rerunsAfterCompletion).toEqual([`t/a ${T1}`]);
  });

  it('a fence that does not grow is a regression; a tick completed twice by the same attempt is a duplicate', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/a ${T1} 10 1 end 1`, `t/a ${T1} 9 1 start 2`, `t/a ${T1} 9 1 end 2`]);
    expect(result.fenceRegressions).toEqual([{ schedule: 't/a', previousFence: 10, fence: 9, line: 3 }]);
    expect(result.duplicateCompletions).toEqual([`t/a ${T1}`]);
  });

  it('torn or foreign lines are reported, not skipped', () => {
    const result = check([`t/a ${T1} 10 1 start 1`, `t/a ${T1} 10 1 be`, 'garbage']);
    expect(result.malformed.map((m) => m.line)).toEqual([2, 3]);
  });
});
