#!/usr/bin/python3
"""Runs rdma-core's pyverbs test suite, unmodified, and prints one line per
test: its id, its result (PASS, FAIL, ERROR, SKIP) and, for every result but
PASS, why, separated by tabs.

    run.py TESTS_DIR [run_tests.py options: --dev, --port, --gid, -v]

TESTS_DIR holds the suite as Debian's python3-pyverbs installs it
(/usr/share/doc/rdma-core/tests, its .py.gz files uncompressed). The suite
is loaded the way its run_tests.py loads it; only the report differs.
"""
import importlib.machinery
import os
import sys
import unittest


class Result(unittest.TestResult):
    def __init__(self, out):
        super().__init__()
        self.out = out

    def report(self, test, status, why=''):
        why = ' '.join(str(why).split())  # one line
        self.out.write(f'{test.id()}\t{status}\t{why}\n')
        self.out.flush()

    def addSuccess(self, test):
        self.report(test, 'PASS')

    def addSkip(self, test, reason):
        self.report(test, 'SKIP', reason)

    def addFailure(self, test, err):
        self.report(test, 'FAIL', err[1])

    def addError(self, test, err):
        self.report(test, 'ERROR', f'{err[0].__name__}: {err[1]}')

    def addExpectedFailure(self, test, err):
        self.report(test, 'PASS', 'expected failure')

    def addUnexpectedSuccess(self, test):
        self.report(test, 'FAIL', 'unexpected success')


def main():
    tests_dir = os.path.abspath(sys.argv[1])
    sys.path.insert(0, tests_dir)
    sys.path.insert(0, os.path.dirname(tests_dir))
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    from args_parser import parser
    loader = importlib.machinery.SourceFileLoader(
        'tests', os.path.join(tests_dir, '__init__.py'))
    tests = loader.load_module()
    parser.parse_args()
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
    result = Result(sys.stdout)
    suite.run(result)


main()
