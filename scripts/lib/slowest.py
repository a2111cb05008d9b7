#!/usr/bin/env python3
"""slowest.py N FILE.xml... — prints the N slowest tests of JUnit-style XML
reports: criterion's (--xml, one <testcase> per test) and ctest's
(--output-junit, one per ctest entry). The ctest entries that wrap the
integration binary (integration, integration_serial: run-integration.py
writes their criterion reports) are left out, so each test is counted once."""
import sys
import xml.etree.ElementTree as ET

WRAPPERS = {"integration", "integration_serial"}


def cases(path):
    root = ET.parse(path).getroot()
    is_ctest = root.tag == "testsuite" and root.get("name", "").lower() != "criterion tests" \
        and any(tc.get("classname") is not None for tc in root.iter("testcase"))
    for suite in root.iter("testsuite"):
        for tc in suite.findall("testcase"):
            name = tc.get("name", "?")
            if is_ctest:
                if name in WRAPPERS:
                    continue
                label = f"ctest {name}"
            else:
                label = f"{suite.get('name', '?')}/{name}"
            status = tc.get("status", "")
            if status.upper() in ("SKIPPED", "DISABLED", "NOTRUN"):
                continue  # criterion lists the tests its filter left out
            yield float(tc.get("time") or 0), label, status


def main():
    n = int(sys.argv[1])
    rows = []
    for path in sys.argv[2:]:
        try:
            rows.extend(cases(path))
        except (OSError, ET.ParseError) as e:
            print(f"slowest: {path}: {e}", file=sys.stderr)
    rows.sort(key=lambda r: -r[0])
    print(f"== the {min(n, len(rows))} slowest of {len(rows)} tests")
    for secs, label, status in rows[:n]:
        print(f"   {secs:8.1f} s  {label}{'  (' + status + ')' if status and status not in ('PASSED', 'run') else ''}")


if __name__ == "__main__":
    main()
