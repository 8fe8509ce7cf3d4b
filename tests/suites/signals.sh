#!/usr/bin/env bash
# Signal handlers that allocate while the thread they interrupt is inside malloc or free,
# and threads that never return from such a handler (issue 6): tests/test_signals.c with
# lfheap preloaded and linked (build/liblfheap.a), a check that all of lfheap's code is
# one section, and the same program on glibc's malloc as a contrast (information only:
# its outcome is printed, never judged). Prints one PASS/FAIL line per check. With
# LFHEAP_TEST_LONG=1 (`make test-long`; `make signals-long` runs this suite alone) a
# million signals per variant and hundreds of killed threads: about ten minutes.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so


# The signal wrapper tells lfheap's code by its address range: no release object may
# keep code outside the section lfheap_text, and in the library every routine it exports
# lies inside it (a link-time optimisation once generated the code again in .text).
stray=$(objdump -h build/obj/release/*.o | awk '$2 ~ /^\.text/' | wc -l)
outside=$(nm build/liblfheap.so | awk '
    $3 == "__start_lfheap_text" { start = $1 } $3 == "__stop_lfheap_text" { stop = $1 }
    $2 == "T" && ($3 ~ /^lfh_/ || $3 == "malloc" || $3 == "free") { code[$3] = $1 }
    END {
        # nm pads addresses to 16 hex digits: as strings they compare as numbers do.
        # Compared as strings explicitly: awk reads a field such as 0000000000003e00
        # as the number 3 (an exponent), which put lfh_cfree below the section.
        if (start == "" || stop == "" || length(code) < 3) { print "no-symbols"; exit }
        for (name in code)
            if ("" code[name] < "" start || "" code[name] >= "" stop)
                printf "%s ", name
    }')
if [ "$stray" -eq 0 ] && [ -z "$outside" ]; then
    echo "PASS one-code-section"
else
    echo "FAIL one-code-section: $stray .text sections left in build/obj/release;" \
        "outside lfheap_text in build/liblfheap.so: $outside"
fi
if [ -n "${LFHEAP_TEST_LONG:-}" ]; then
    run signals-preloaded env LD_PRELOAD="$lib" build/t-plain/test_signals 1000000 400
    run signals-linked build/t-linked/test_signals 200000 200
else
    run signals-preloaded env LD_PRELOAD="$lib" build/t-plain/test_signals 20000 60
    run signals-linked build/t-linked/test_signals 10000 30
fi
# Handlers on an 8 KiB alternate stack whose calls also purge: with a purge delay of 0,
# every slow path returns freed runs to the kernel.
run signals-sigstksz-purging env LFHEAP_PURGE_MS=0 LD_PRELOAD="$lib" build/t-plain/test_signals \
    20000 60 allocating_handlers_fit_sigstksz
run signals-sigstksz-purging-linked env LFHEAP_PURGE_MS=0 build/t-linked/test_signals 20000 60 \
    allocating_handlers_fit_sigstksz
# glibc: for contrast only (the program prints an INFO line and exits 0). TEST_ON_GLIBC
# tells the program that it is meant to run without lfheap (tests/testutil.h).
TEST_ON_GLIBC=1 timeout 60 build/t-plain/test_signals 20000 ||
    echo "INFO glibc contrast run did not finish"
