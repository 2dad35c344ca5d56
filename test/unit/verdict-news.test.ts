// Which verdicts are news, and which news becomes a Drifted Event (src/agent/verdict-changes.ts).
import { describe, expect, it } from 'vitest';
import { verdictNews } from '../../src/agent/verdict-changes.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const v = (target: string, state: Verdict['state'], reason: Verdict['reason']): Verdict => ({
  target,
  state,
  reason,
  message: `${reason} message`,
  mismatches: [],
});

describe('verdictNews', () => {
  it('the first pass: every verdict is news; drift is a warning with a Drifted Event', () => {
    const { news, told } = verdictNews(new Map(), [
      v('app:/etc/app', 'InSync', 'InSync'),
      v('app:/etc/log.yaml', 'Drifted', 'SubPathStale'),
    ]);
    expect(news.map((n) => [n.verdict.target, n.level, n.event])).toEqual([
      ['app:/etc/app', 'info', undefined],
      ['app:/etc/log.yaml', 'warn', 'app:/etc/log.yaml: SubPathStale message'],
    ]);
    expect(told.get('app:/etc/log.yaml')).toBe('Drifted:SubPathStale');
  });

  it('the same state and reason again: no news, and nothing told twice', () => {
    const first = verdictNews(new Map(), [v('t', 'Drifted', 'ContentDrift')]);
    expect(verdictNews(first.told, [v('t', 'Drifted', 'ContentDrift')]).news).toEqual([]);
  });

  it('a new reason in the same state is news', () => {
    const first = verdictNews(new Map(), [v('t', 'Drifted', 'ContentDrift')]);
    expect(verdictNews(first.told, [v('t', 'Drifted', 'FileMissing')]).news).toHaveLength(1);
  });

  it('a missing source is a warning without an Event (it would repeat on every Pod)', () => {
    const { news } = verdictNews(new Map(), [v('t', 'Missing', 'SourceMissing')]);
    expect(news[0]).toMatchObject({ level: 'warn' });
    expect(news[0]?.event).toBeUndefined();
  });

  it('does not change the map it is given', () => {
    const lastTold = new Map([['t', 'InSync:InSync']]);
    verdictNews(lastTold, [v('t', 'Propagating', 'Propagating')]);
    expect(lastTold.get('t')).toBe('InSync:InSync');
  });
});
