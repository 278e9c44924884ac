#!/bin/sh
# mutation-check: proves the fault-schedule test's short run (part of
# make test) catches a deliberately broken build. It copies the tracked
# sources to a scratch directory, puts the frozen-overlay bug back there (a
# write refused without quorum left its candidate overlay standing with an
# empty journal), and expects `go test ./cluster -run 'TestSchedule$'` to
# fail with overlay violations. Exit 0 when the bug is caught.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
git ls-files -z | xargs -0 cp --parents -t "$work"
cd "$work"
file=cluster/fallback.go
# In record(), the refusal branch keeps the candidate overlay, as the old
# code did.
awk '
/^func \(fb \*fallback\) record\(/ { inrec = 1 }
inrec && /^\tif err != nil \{$/ { print; print "\t\tfb.overlay = ov // mutation: the frozen overlay"; done = 1; inrec = 0; next }
{ print }
END { if (!done) exit 3 }' "$file" >"$file.new" || {
	echo "mutation-check: the refusal branch of record() in $file was not found; update the mutation" >&2
	exit 1
}
mv "$file.new" "$file"
if out=$(go test -count=1 ./cluster -run 'TestSchedule$' 2>&1); then
	echo "$out"
	echo "mutation-check: the short schedule run passed on a build with the frozen overlay put back" >&2
	exit 1
fi
if ! echo "$out" | grep -q 'violations overlay'; then
	echo "$out"
	echo "mutation-check: the broken build failed, but not with overlay violations" >&2
	exit 1
fi
echo "mutation-check: the short schedule run caught the frozen overlay:"
echo "$out" | grep 'violations'
