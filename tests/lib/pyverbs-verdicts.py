#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Runs rdma-core's pyverbs test suite and writes one verdict per test.

    pyverbs-verdicts.py TESTS_DIR OUT --dev DEV [--gid N] [unittest args]

TESTS_DIR is a copy of rdma-core's tests/ (Debian's python3-pyverbs ships
it, gzipped, in /usr/share/doc/rdma-core/tests; the caller unpacks it).
The suite is loaded as its own run_tests.py loads it (the package's
__init__.py, then args_parser for --dev/--gid/...); what differs is the
result: every test's verdict goes to OUT, one line each,

    VERDICT<TAB>TEST ID<TAB>REASON

with VERDICT one of pass, skip, fail, error, xfail, xpass, and REASON the
skip reason or the first line of the exception (tabs and newlines
flattened), so that two devices' runs can be compared test by test
(tests/guest/23-pyverbs.sh). unittest's own report still goes to stderr.
The exit status is 0 when the suite ran, whatever its verdicts: judging
them is the caller's business.
"""

import os
import sys
import unittest
from importlib.machinery import SourceFileLoader


def one_line(text):
    return " ".join(str(text).split())[:300]


class VerdictResult(unittest.TextTestResult):
    """A TextTestResult that also remembers each test's verdict."""

    verdicts = []

    def _note(self, verdict, test, reason=""):
        VerdictResult.verdicts.append((verdict, test.id(), one_line(reason)))

    @staticmethod
    def _last_line(err):
        # err is (type, value, traceback): the exception's own message is
        # the useful part, its type the rest.
        etype, value, _ = err
        return f"{etype.__name__}: {value}"

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note("pass", test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note("skip", test, reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note("fail", test, self._last_line(err))

    def addError(self, test, err):
        super().addError(test, err)
        # setUpClass/module failures come as a _ErrorHolder "test".
        self._note("error", test, self._last_line(err))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note("xfail", test, self._last_line(err))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note("xpass", test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._note("fail" if failed else "error", subtest, self._last_line(err))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tests_dir, out = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    sys.path.insert(0, tests_dir)
    from args_parser import parser  # noqa: E402 (rdma-core's, in tests_dir)

    tests = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
    # Leaves unittest's own arguments (test names, -k) in sys.argv.
    parser.parse_args()
    prog = unittest.main(module=tests, exit=False, verbosity=2,
                         testRunner=unittest.TextTestRunner(resultclass=VerdictResult,
                                                            verbosity=2))
    with open(out, "w") as f:
        for verdict, test_id, reason in VerdictResult.verdicts:
            f.write(f"{verdict}\t{test_id}\t{reason}\n")
    r = prog.result
    print(f"pyverbs: {r.testsRun} run, {len(r.failures)} failures, {len(r.errors)} errors, "
          f"{len(r.skipped)} skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
