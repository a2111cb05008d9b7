#!/usr/bin/env python3
"""run-integration.py — runs one part of the integration suite (criterion).

    run-integration.py BINARY parallel|serial

The suite is split in two ctest entries (tests/CMakeLists.txt):

  parallel  every test not named in tests/integration/SERIAL, with
            MONGOPLEX_TEST_JOBS criterion jobs (default: the number of CPUs).
            Each test has its own proxy, ports, temp dirs and databases
            (h_unique), so they may run side by side.
  serial    the tests named in tests/integration/SERIAL (each with the reason
            it must run alone: it measures time, or needs the whole machine),
            one at a time; ctest runs this entry with RUN_SERIAL.

MONGOPLEX_INTEG_SUITES (comma-separated suite names, empty: all) restricts both
parts to those suites: scripts/test.sh sets it for the FerretDB sha1-tls pass
(MONGOPLEX_FERRETDB_SUITES=backend).

With MONGOPLEX_TEST_REPORT_DIR set, criterion's XML report (with each test's
time) is written to DIR/integration-PART.xml; scripts/test.sh prints the
slowest tests from it.

A part with no test to run (every test filtered away) is an error, not a pass.
"""
import fnmatch
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SERIAL_FILE = os.path.join(HERE, "..", "integration", "SERIAL")


def serial_patterns():
    pats = []
    with open(SERIAL_FILE, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                pats.append(line)
    return pats


def all_tests(binary):
    out = subprocess.run([binary, "--list"], check=True, capture_output=True,
                         text=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.startswith(("├", "└", "│")) and ":" in line:
            suite = line.split(":", 1)[0].strip()
        elif suite is not None:
            name = line.lstrip("├└│─ ").strip()
            if name:
                tests.append(f"{suite}/{name}")
    return tests


def filter_for(chosen, tests):
    """One criterion --filter for exactly `chosen`: SUITE/* for a suite whose
    every test is chosen, the test's own name otherwise. (Criterion's
    extglob matcher aborts on patterns of a few thousand characters, so the
    names are not simply all listed.)"""
    by_suite = {}
    for t in tests:
        by_suite.setdefault(t.split("/", 1)[0], []).append(t)
    want = set(chosen)
    alts = []
    for suite, names in by_suite.items():
        picked = [t for t in names if t in want]
        if picked and len(picked) == len(names):
            alts.append(f"{suite}/*")
        else:
            alts.extend(picked)
    pattern = "@(" + "|".join(alts) + ")"
    if len(pattern) > 3000:
        sys.exit(f"run-integration: the filter would be {len(pattern)} characters, more than "
                 "criterion's matcher takes: name fewer single tests in SERIAL")
    return pattern


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("parallel", "serial"):
        sys.exit("usage: run-integration.py BINARY parallel|serial")
    binary, part = sys.argv[1], sys.argv[2]
    pats = serial_patterns()
    tests = all_tests(binary)
    for p in pats:
        if not any(fnmatch.fnmatchcase(t, p) for t in tests):
            sys.exit(f"run-integration: SERIAL names {p!r}, which matches no test")
    is_serial = lambda t: any(fnmatch.fnmatchcase(t, p) for p in pats)
    chosen = [t for t in tests if is_serial(t) == (part == "serial")]
    suites = [s for s in os.environ.get("MONGOPLEX_INTEG_SUITES", "").split(",") if s]
    if suites:
        unknown = sorted(set(suites) - {t.split("/", 1)[0] for t in tests})
        if unknown:
            sys.exit(f"run-integration: MONGOPLEX_INTEG_SUITES names unknown suites {unknown}")
        chosen = [t for t in chosen if t.split("/", 1)[0] in suites]
    if not chosen:
        print(f"run-integration: no {part} test in the selected suites {suites}: nothing to run")
        # Not a silent pass: ctest's SKIP_RETURN_CODE reports it as skipped.
        sys.exit(77)
    jobs = 1 if part == "serial" else int(os.environ.get("MONGOPLEX_TEST_JOBS") or os.cpu_count() or 1)
    args = [binary, "--jobs", str(jobs), "--filter", filter_for(chosen, tests)]
    report = os.environ.get("MONGOPLEX_TEST_REPORT_DIR")
    if report:
        os.makedirs(report, exist_ok=True)
        args.append(f"--xml={os.path.join(report, 'integration-' + part + '.xml')}")
    print(f"run-integration: {part}: {len(chosen)} of {len(tests)} tests, {jobs} job(s)", flush=True)
    os.execv(binary, args)


if __name__ == "__main__":
    main()
