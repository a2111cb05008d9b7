#!/usr/bin/env bash
# Generates the files the Debian package ships that are derived from the
# built binary, so they can never drift from the settings table in
# config/cfg.c:
#
#   OUTDIR/mongoplex.ini     the conffile: `mongoplex --write-example-config`
#                            behind a short header about the packaged service
#   OUTDIR/mongoplex.ini.5   packaging/man/mongoplex.ini.5.in with its SETTINGS
#                            section generated from `mongoplex --help-config`
#                            (ranges and groups from the example config)
#   OUTDIR/mongoplex.8       packaging/man/mongoplex.8.in with version and date
#
# and checks them: every setting of --help-config is in the man page, every
# long option of --help is in mongoplex.8, the conffile passes --test-config.
#
#   packaging/gen-docs.sh BINARY OUTDIR
#
# Called by debian/rules after the build. The man page date comes from
# SOURCE_DATE_EPOCH (set by dpkg-buildpackage from debian/changelog) for
# reproducible builds; without it, today.
set -euo pipefail

die() { echo "gen-docs.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 BINARY OUTDIR"
bin="$1"
out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -x "$bin" ] || die "$bin is not an executable"
mkdir -p "$out"

version="$("$bin" --version | awk '{print $2}')"
[ -n "$version" ] || die "cannot read the version from $bin --version"
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)"
else
  date="$(date -u +%Y-%m-%d)"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" --write-example-config >"$tmp/example.ini"
"$bin" --help-config >"$tmp/help.txt"
"$bin" --help >"$tmp/usage.txt"
[ -s "$tmp/example.ini" ] || die "--write-example-config printed nothing"
[ -s "$tmp/help.txt" ] || die "--help-config printed nothing"

# ---------------------------------------------------------------- conffile
# A header for the packaged file, ending with a line that is only ";"
# (tests/package/test_package.sh strips up to there to compare the rest
# with --write-example-config).
{
  cat <<'EOF'
; /etc/mongoplex/mongoplex.ini: read by mongoplex.service, see mongoplex.ini(5).
; After editing:  systemctl reload mongoplex    (settings marked [reload])
;                 systemctl restart mongoplex   (all others)
; Both check the file first: mongoplex --test-config -c /etc/mongoplex/mongoplex.ini
; A unix socket, if wanted, belongs in the service's RuntimeDirectory:
;   unix_socket = /run/mongoplex/mongoplex.sock
;
EOF
  # Drop trailing blanks ("unix_socket = " for an empty default): same
  # meaning for the INI parser, and editors and linters stay quiet.
  sed 's/[[:space:]]*$//' "$tmp/example.ini"
} >"$out/mongoplex.ini"
"$bin" --test-config -c "$out/mongoplex.ini" >/dev/null ||
  die "the generated $out/mongoplex.ini does not pass --test-config"

# ---------------------------------------------------------------- settings
# --help-config:   NAME (default: VALUE[, reloadable])
#                      description, wrapped, indented
# example config:  ;;; GROUP      ; range MIN..MAX [reload]      NAME = VALUE
awk -v example="$tmp/example.ini" '
function roff(s) {
	gsub(/\\/, "\\e", s)
	return s
}
# A text line (already escaped) for the body of a .TP: no leading . or \x27
# (those would be control lines).
function line(s) {
	if (s ~ /^[.\x27]/)
		s = "\\&" s
	return s
}
function title(s) { return toupper(substr(s, 1, 1)) substr(s, 2) }
function flush() {
	if (name == "")
		return
	if (group[name] != cur_group && group[name] != "") {
		cur_group = group[name]
		print ".SS " title(cur_group)
	}
	print ".TP"
	print ".B " name
	print line(roff(desc))
	print ".br"
	d = (def == "\"\"") ? "empty" : "\\fB" roff(def) "\\fR"
	s = "Default: " d "."
	if (range[name] != "") {
		split(range[name], mm, /\.\./)
		s = s " Range: " mm[1] " to " mm[2] "."
	}
	s = s (reload ? " Reloadable." : " Needs a restart.")
	print line(s)
	n++
	name = ""
}
BEGIN {
	g = ""
	while ((getline l < example) > 0) {
		if (l ~ /^;;; /) {
			g = substr(l, 5)
		} else if (match(l, /^; range [0-9-]+\.\.[0-9-]+/)) {
			pend = substr(l, 9, RLENGTH - 8)
		} else if (l ~ /^[a-z_][a-z0-9_]* *=/) {
			k = l
			sub(/ *=.*/, "", k)
			group[k] = g
			range[k] = pend
			pend = ""
		}
	}
	close(example)
}
/^[a-z_][a-z0-9_]* \(default: .*\)$/ {
	flush()
	name = $1
	def = $0
	sub(/^[^(]*\(default: /, "", def)
	sub(/\)$/, "", def)
	reload = 0
	if (def ~ /, reloadable$/) {
		reload = 1
		sub(/, reloadable$/, "", def)
	}
	desc = ""
	next
}
/^[ \t]+[^ \t]/ && name != "" {
	t = $0
	sub(/^[ \t]+/, "", t)
	desc = (desc == "") ? t : desc " " t
	next
}
/^[ \t]*$/ { next }
{
	printf "gen-docs.sh: unexpected --help-config line: %s\n", $0 > "/dev/stderr"
	bad = 1
}
END {
	flush()
	if (bad || n == 0)
		exit 1
}
' "$tmp/help.txt" >"$tmp/settings.roff" || die "cannot parse --help-config output"

# Every setting of --help-config must appear as an entry.
awk '/^[a-z_][a-z0-9_]* \(default: /{print $1}' "$tmp/help.txt" >"$tmp/names"
while read -r n; do
  grep -qx ".B $n" "$tmp/settings.roff" || die "setting $n missing from the generated man page"
done <"$tmp/names"

subst() {
  sed -e "s/@VERSION@/$version/g" -e "s/@DATE@/$date/g" "$1"
}
subst "$here/man/mongoplex.ini.5.in" |
  awk -v f="$tmp/settings.roff" '$0 == "@SETTINGS@" { while ((getline l < f) > 0) print l; next } { print }' \
    >"$out/mongoplex.ini.5"
subst "$here/man/mongoplex.8.in" >"$out/mongoplex.8"
! grep -n '@[A-Z]*@' "$out/mongoplex.8" "$out/mongoplex.ini.5" || die "unfilled placeholder"

# Every long option the binary knows must be described in mongoplex.8
# (written as \-\-name in roff).
for opt in $(grep -o -- '--[a-z][a-z-]*' "$tmp/usage.txt" | sort -u); do
  roffopt="$(printf '%s' "$opt" | sed 's/-/\\-/g')"
  grep -qF -- "$roffopt" "$out/mongoplex.8" || die "option $opt (from --help) is not described in mongoplex.8"
done

echo "gen-docs.sh: $(wc -l <"$tmp/names") settings; wrote $out/mongoplex.ini $out/mongoplex.ini.5 $out/mongoplex.8"
