#!/usr/bin/python3
"""Fills the rxe column of verdicts.md from run.py's lines over rxe (clib/pyverbs/rxe -o FILE)
and prints the comparison: the tests rxe passes and softnic does not, and the counts.

    table.py --rxe FILE VERDICTS_MD
"""
import argparse
import collections


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rxe', required=True, help="run.py's output over rxe")
    ap.add_argument('verdicts')
    a = ap.parse_args()
    rxe = {}
    for line in open(a.rxe):
        f = line.rstrip('\n').split('\t')
        if len(f) >= 2 and f[0].startswith('tests.'):
            rxe[f[0]] = f[1]
    out, seen = [], set()
    worse, counts = [], collections.Counter()
    for line in open(a.verdicts):
        cells = line.rstrip('\n').split(' | ')
        if line.startswith('| tests.') and len(cells) >= 4:
            test = cells[0][2:]
            seen.add(test)
            cells[1] = rxe.get(test, '—')
            counts[cells[1]] += 1
            if cells[1] == 'PASS' and cells[2] != 'PASS':
                worse.append(f'{test}: softnic {cells[2]}')
            line = ' | '.join(cells) + '\n'
        out.append(line)
    with open(a.verdicts, 'w') as f:
        f.write(''.join(out))
    for test in sorted(set(rxe) - seen):
        print(f'{test}: run over rxe, not in {a.verdicts}')
    print('rxe: ' + ', '.join(f'{n} {s}' for s, n in sorted(counts.items())))
    print(f'rxe PASS, softnic not: {len(worse)}')
    for w in worse:
        print('  ' + w)


main()
