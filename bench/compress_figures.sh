#!/usr/bin/env bash
# compress_figures.sh — wire bytes and proxy CPU per 20-id lookup for each
# compressor, with mongoplex-bench (libmongoc, compressors= in its URI).
#
#   bench/compress_figures.sh PROXY_HOST:PORT PROXY_PID [QUERIES]
#
# The collection must be loaded (mongoplex-bench load --uri ... --docs N, the
# same N as BENCH_DOCS, default 20000). Per algorithm (none, snappy, zlib,
# zstd): one thread, QUERIES (default 2000) lookups of 20 random ids; proxy
# CPU = utime+stime of PROXY_PID (/proc) over the run / QUERIES; bytes from
# mongoplexStats (requests: <alg>_decompressed_bytes_wire; replies:
# <alg>_compressed_bytes_wire; raw sizes from the *_bytes_raw counters).
# Stats are read with /usr/bin/python3 (Debian pymongo). Short runs on a
# shared machine: CPU figures are indicative, byte figures exact.
set -euo pipefail
hp="$1" pid="$2" q="${3:-2000}" docs="${BENCH_DOCS:-20000}"
bench="$(dirname "$0")/../build/bench/mongoplex-bench"
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
stats() {
  /usr/bin/python3 -c '
import json, sys
from pymongo import MongoClient
c = MongoClient("mongodb://'"$hp"'/").admin.command("mongoplexStats")["counters"]
print(json.dumps({k: v for k, v in c.items() if "compress" in k}))'
}
tck=$(getconf CLK_TCK)
printf '%-7s %10s %10s %10s %10s %12s\n' alg req_raw req_wire rep_raw rep_wire cpu_us/op
for alg in none snappy zlib zstd; do
  uri="mongodb://$hp/?compressors=$alg"
  [ "$alg" = none ] && uri="mongodb://$hp/"
  s0="$(stats)"; c0="$(cpu)"
  "$bench" run --path "p=$uri" --docs "$docs" --threads 1 --ids 20 --queries "$q" \
    --repeat 1 --warmup 50 >/dev/null 2>&1
  c1="$(cpu)"; s1="$(stats)"
  /usr/bin/python3 - "$alg" "$q" "$tck" "$c0" "$c1" "$s0" "$s1" <<'PY'
import json, sys
alg, q, tck, c0, c1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
a, b = json.loads(sys.argv[6]), json.loads(sys.argv[7])
cpu = (c1 - c0) * 1e6 / tck / q
if alg == "none":
    print("%-7s %10s %10s %10s %10s %12.1f" % (alg, "-", "-", "-", "-", cpu))
else:
    d = {k: b[k] - a[k] for k in b}
    n = max(d[alg + "_decompressed_msgs"], 1)
    m = max(d[alg + "_compressed_msgs"], 1)
    print("%-7s %10.0f %10.0f %10.0f %10.0f %12.1f   (%d requests, %d replies compressed)" % (
        alg, d[alg + "_decompressed_bytes_raw"] / n, d[alg + "_decompressed_bytes_wire"] / n,
        d[alg + "_compressed_bytes_raw"] / m, d[alg + "_compressed_bytes_wire"] / m, cpu,
        d[alg + "_decompressed_msgs"], d[alg + "_compressed_msgs"]))
PY
done
