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

Shared FerretDB (issue 21): the tests that need a FerretDB beside the suite's
backend but not one of their own share one server per kind per run
(h_ferret_shared in tests/integration/harness_ferret.c). This script makes the
directory for them and exports it as MONGOPLEX_SHARED_FERRETDB_DIR with the
admin identity of the auth kinds (MONGOPLEX_SHARED_FERRETDB_USER / _PASSWORD,
the password new each run); the first test that asks for a kind starts it
(scripts/backend.sh start KIND DIR/KIND, under a lock), the others use it.
The criterion binary runs as this script's child, and afterwards every server
started there is stopped and the directory removed: after a pass, a failure,
a signal (SIGINT, SIGTERM, SIGHUP: passed on to the criterion run first), the
hang guard (MONGOPLEX_INTEG_TIMEOUT seconds, default 2300, below ctest's
TIMEOUT 2400: the criterion run is killed), and, by a detached watchdog that
waits for this script to go away, even when it is SIGKILLed. Opt-out:
MONGOPLEX_SHARED_FERRETDB=0 (every such test starts its own, as before).
"""
import fnmatch
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SERIAL_FILE = os.path.join(HERE, "..", "integration", "SERIAL")
BACKEND_SH = os.path.join(HERE, "..", "..", "scripts", "backend.sh")


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


def stop_shared(root):
    """Stop every server started under root (backend.sh stop DIR), remove root."""
    if not os.path.isdir(root):
        return
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if os.path.isfile(os.path.join(d, "pid")):
            subprocess.run([BACKEND_SH, "stop", d], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False, timeout=60)
    shutil.rmtree(root, ignore_errors=True)


def start_watchdog(root):
    """A detached process that cleans root up once this one is gone, however
    it went (ctest's timeout SIGKILLs the process tree it knows: this one is
    not in it). Returns the pipe end whose closing (our exit) wakes it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.close(w)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                while os.read(r, 1):
                    pass
                # We were killed: the criterion run goes too, then its servers.
                try:
                    with open(os.path.join(root, "criterion.pgid"), encoding="ascii") as f:
                        os.killpg(int(f.read()), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
                stop_shared(root)
        finally:
            os._exit(0)
    os.close(r)
    os.waitpid(pid, 0)
    return w


def run_child(args, env, timeout, root):
    """Run the criterion binary (its own process group, recorded in
    root/criterion.pgid for the watchdog); returns its exit code. A signal to
    us goes to its group; so does the kill of the hang guard."""
    child = subprocess.Popen(args, env=env, start_new_session=True)
    got = []
    if root:
        with open(os.path.join(root, "criterion.pgid"), "w", encoding="ascii") as f:
            f.write(str(child.pid))

    def forward(signum, _frame):
        got.append(signum)
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        rc = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"run-integration: the criterion run passed {timeout} s "
              "(MONGOPLEX_INTEG_TIMEOUT): killed", flush=True)
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()
        return 1
    if got:
        # The workers may outlive criterion's own exit on a signal.
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return 128 + got[0]
    return rc if rc >= 0 else 128 - rc


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
    env = dict(os.environ)
    root = None
    if env.get("MONGOPLEX_SHARED_FERRETDB", "1") != "0":
        # Short: the tests' users and password files under it go into config lines.
        root = tempfile.mkdtemp(prefix="mpsh-")
        env["MONGOPLEX_SHARED_FERRETDB_DIR"] = root
        env["MONGOPLEX_SHARED_FERRETDB_USER"] = "mpshared"
        env["MONGOPLEX_SHARED_FERRETDB_PASSWORD"] = "Sh-" + secrets.token_hex(8)
        watchdog = start_watchdog(root)
    else:
        env.pop("MONGOPLEX_SHARED_FERRETDB_DIR", None)
    print(f"run-integration: {part}: {len(chosen)} of {len(tests)} tests, {jobs} job(s)"
          f"{', shared FerretDB under ' + root if root else ''}", flush=True)
    timeout = float(os.environ.get("MONGOPLEX_INTEG_TIMEOUT") or 2300)
    try:
        rc = run_child(args, env, timeout, root)
    finally:
        if root:
            started = sorted(d for d in os.listdir(root)
                             if os.path.isfile(os.path.join(root, d, "uri")))
            stop_shared(root)
            print(f"run-integration: shared FerretDB started: {', '.join(started) or 'none'};"
                  " stopped", flush=True)
            os.close(watchdog)
    sys.exit(rc)


if __name__ == "__main__":
    main()
