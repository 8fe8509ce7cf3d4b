#!/usr/bin/env bash
# The misuse collection (tests/misuse.c, tests/misuse.sh, docs/HARDENING.md):
#  - the runner classifies what happened, checked with a stand-in program whose cases
#    survive, abort, crash, exit with a status, hang or fail on their own;
#  - the debug build stops every double free and every invalid free, each with its own
#    report ("lfheap: double free", "invalid pointer" or "use after free");
#  - the release build, which ignores what it never handed out, either stops or survives
#    every case, and never hangs;
#  - the secure build, when build/liblfheap-secure.so exists, stops every double and
#    invalid free and at least 70% of the whole collection (nothing is printed for it
#    while it does not exist).
# One PASS/FAIL line per check. A run that takes longer than TIMEOUT seconds counts as
# hung: every case takes well under a second, so that is no judgement of speed.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
B=build
TIMEOUT=10
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---- the runner ----------------------------------------------------------------------
cat >"$TMP/fake" <<'EOF'
#!/usr/bin/env bash
if [ "$1" = --list ]; then
    printf '%s\tdouble-free\tx\n' ok abrt segv
    printf '%s\tinvalid-free\tx\n' exit3 hang broken
    exit 0
fi
case $1 in
abrt | segv) kill -"${1^^}" $$ ;;
exit3) exit 3 ;;
hang) sleep 60 ;;
broken) exit 77 ;;
esac
echo "misuse: survived $1"
EOF
chmod +x "$TMP/fake"
bash tests/misuse.sh --prog "$TMP/fake" --timeout 2 --tsv glibc >"$TMP/fake.tsv" 2>"$TMP/fake.err"
want="ok survived ·
abrt stopped ABRT
segv stopped SEGV
exit3 stopped exit 3
hang hung hung
broken error error (77)"
got=$(cut -f1,4,5 "$TMP/fake.tsv" | tr '\t' ' ')
[ "$got" = "$want" ] && pass misuse-runner-outcomes || fail misuse-runner-outcomes "$got"

bash tests/misuse.sh --prog "$TMP/fake" --timeout 2 --cases ok,abrt,exit3 glibc \
    missing="$TMP/none.so" >"$TMP/fake.md" 2>"$TMP/fake.err"
grep -qx '| ok | double-free | · |' "$TMP/fake.md" &&
    grep -qx '| abrt | double-free | ✓ ABRT |' "$TMP/fake.md" &&
    grep -qx '| \*\*stopped\*\* | double-free | 1 of 2 |' "$TMP/fake.md" &&
    grep -qx '| \*\*stopped\*\* | \*\*all\*\* | 2 of 3 |' "$TMP/fake.md" &&
    grep -qx 'Stopped of 3 misuses: glibc 2.' "$TMP/fake.md" &&
    pass misuse-runner-table || fail misuse-runner-table "$(cat "$TMP/fake.md")"
grep -q "^misuse.sh: missing: skipped, $TMP/none.so does not exist" "$TMP/fake.err" &&
    ! grep -q missing "$TMP/fake.md" && pass misuse-runner-skips-missing ||
    fail misuse-runner-skips-missing "$(cat "$TMP/fake.err")"

n=$("$B/t-plain/misuse" --list | wc -l)
kinds=$("$B/t-plain/misuse" --list | cut -f2 | sort -u | tr '\n' ' ')
[ "$n" -ge 30 ] && [ "$kinds" = "double-free invalid-free overflow use-after-free " ] &&
    pass misuse-collection || fail misuse-collection "$n cases, kinds: $kinds"

# ---- lfheap's builds ---------------------------------------------------------------
# runs NAME KINDS: the runner's lines for lfheap's build NAME, in $TMP/NAME.tsv
runs() {
    bash tests/misuse.sh --tsv --timeout "$TIMEOUT" ${2:+--kinds "$2"} "$1" >"$TMP/$1.tsv" \
        2>"$TMP/$1.err" || fail "misuse-$1-runner" "$(tail -3 "$TMP/$1.err")"
}

runs lfheap-debug double-free,invalid-free
while IFS=$'\t' read -r case kind _ outcome detail report; do
    if [ "$outcome" = stopped ] &&
        [[ $report =~ ^lfheap:\ (double\ free|invalid\ pointer|use\ after\ free): ]]; then
        pass "misuse-debug-stops-$case"
    else
        fail "misuse-debug-stops-$case" "$kind: $outcome $detail $report"
    fi
done <"$TMP/lfheap-debug.tsv"

runs lfheap
while IFS=$'\t' read -r case _ _ outcome detail report; do
    case $outcome in
    stopped | survived) pass "misuse-release-no-hang-$case" ;;
    *) fail "misuse-release-no-hang-$case" "$outcome $detail $report" ;;
    esac
done <"$TMP/lfheap.tsv"

if [ -f "$B/liblfheap-secure.so" ]; then
    runs lfheap-secure
    stopped=0 total=0
    while IFS=$'\t' read -r case kind _ outcome detail report; do
        total=$((total + 1))
        [ "$outcome" = stopped ] && stopped=$((stopped + 1))
        case $kind in
        double-free | invalid-free)
            [ "$outcome" = stopped ] && pass "misuse-secure-stops-$case" ||
                fail "misuse-secure-stops-$case" "$outcome $detail $report"
            ;;
        esac
    done <"$TMP/lfheap-secure.tsv"
    [ "$total" -gt 0 ] && [ $((stopped * 10)) -ge $((total * 7)) ] &&
        pass misuse-secure-stops-70-percent ||
        fail misuse-secure-stops-70-percent "$stopped of $total"
fi
