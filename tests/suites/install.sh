#!/usr/bin/env bash
# Packaging: `make install` into a staging directory (DESTDIR) puts every library, header
# and the pkg-config file where a distribution expects them, with versioned sonames; the
# headers compile in every C and C++ mode; a program built against the installed copy runs
# on it; uninstall takes it all out again; and the build honours CFLAGS and LDFLAGS,
# rebuilding when they change, and CC (clang). Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/stage
abi=$(sed -n 's/^ABI_VERSION *:= *//p' Makefile)
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
libdir=$dest/usr/lib/x86_64-linux-gnu

if make -s install DESTDIR="$dest" PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu \
        >"$tmp/install.log" 2>&1; then
    pass install-runs
else
    tail -20 "$tmp/install.log"
    fail install-runs
fi

# Each shared library: NAME.so.VERSION a file whose soname is NAME.so.ABI, NAME.so.ABI a
# link to it, NAME.so a link to NAME.so.ABI; each archive a file.
bad=""
for name in liblfheap liblfheap-stats liblfheap-debug liblfheap-stats-debug liblfheap-secure; do
    so=$libdir/$name.so
    if [ ! -f "$so.$version" ] || [ -L "$so.$version" ]; then
        bad="$bad $name.so.$version-not-a-file"
        continue
    fi
    soname=$(readelf -d "$so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "$name.so.$abi" ] || bad="$bad $name-soname=$soname"
    [ "$(readlink "$so.$abi")" = "$name.so.$version" ] || bad="$bad $name.so.$abi-link"
    [ "$(readlink "$so")" = "$name.so.$abi" ] || bad="$bad $name.so-link"
    [ -f "$libdir/$name.a" ] || bad="$bad $name.a"
done
for header in lfheap.h lfheap_buddy.h; do
    [ -f "$dest/usr/include/$header" ] || bad="$bad $header"
done
[ -z "$bad" ] && pass install-layout || fail install-layout "$bad"

pc=$libdir/pkgconfig/lfheap.pc
if grep -qx "Version: $version" "$pc" && grep -qx "libdir=/usr/lib/x86_64-linux-gnu" "$pc" &&
        grep -qx "prefix=/usr" "$pc"; then
    pass install-pkgconfig
else
    fail install-pkgconfig "$(cat "$pc" 2>&1 | tr '\n' ' ')"
fi

# A program compiled and linked against the staged copy (the flags pkg-config gives, with
# the staging directory in front), run with it: it must need liblfheap.so.ABI, and its
# malloc must be lfheap's (the extended API sees the block).
cat >"$tmp/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lfheap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *p = malloc(1000);
    Dl_info info;
    if (p == NULL || malloc_size(p) < 1000 || dladdr((void *)malloc, &info) == 0) {
        puts("malloc is not lfheap's");
        return 1;
    }
    memset(p, 7, 1000);
    free(p);
    printf("%s\n", info.dli_fname);
    return 0;
}
EOF
cflags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
         pkg-config --cflags --libs lfheap 2>/dev/null ||
         echo "-I$dest/usr/include -L$libdir -llfheap")
# shellcheck disable=SC2086
if ${CC:-cc} "$tmp/prog.c" -o "$tmp/prog" $cflags -ldl 2>"$tmp/cc.log"; then
    needed=$(readelf -d "$tmp/prog" | sed -n 's/.*(NEEDED).*\[\(liblfheap.*\)\]/\1/p')
    served=$(LD_LIBRARY_PATH=$libdir "$tmp/prog" 2>&1)
    if [ "$needed" = "liblfheap.so.$abi" ] && [ "$served" = "$libdir/liblfheap.so.$abi" ]; then
        pass install-link-and-run
    else
        fail install-link-and-run "needs '$needed', served by '$served'"
    fi
else
    cat "$tmp/cc.log"
    fail install-link-and-run "does not compile against the staged copy"
fi

# The installed headers compile cleanly in every language mode a program might use, down
# to C89 and C++98, with -pedantic (lfheap.h's bool is C99's).
printf '#include <lfheap.h>\n#include <lfheap_buddy.h>\nint main(void) { return malloc_zero_fill(0); }\n' \
    >"$tmp/header.c"
bad=""
for compiler in gcc clang g++ clang++; do
    command -v "$compiler" >/dev/null || continue
    case $compiler in
    *++) standards="c++98 c++11 c++17 c++20" language=c++ ;;
    *) standards="c89 gnu89 c99 c11 c17" language=c ;;
    esac
    for standard in $standards; do
        "$compiler" -std="$standard" -x "$language" -Wall -Wextra -Werror -pedantic \
            -I"$dest/usr/include" -c "$tmp/header.c" -o "$tmp/header.o" >"$tmp/header.log" 2>&1 ||
            bad="$bad $compiler-$standard: $(head -1 "$tmp/header.log")"
    done
done
[ -z "$bad" ] && pass install-headers-compile || fail install-headers-compile "$bad"

# CFLAGS and LDFLAGS reach the libraries' build, and a change of either rebuilds them: a
# build with the stack protector on everything and no build id, then the same build
# directory with the defaults again.
build=$tmp/build
flagged() {
    nm -D --undefined-only "$build/liblfheap.so" | grep -q __stack_chk_fail &&
        ! readelf -n "$build/liblfheap.so" | grep -q 'Build ID'
}
if make -s BUILD="$build" CFLAGS="-O2 -g -fstack-protector-all" \
        LDFLAGS="-Wl,--build-id=none" "$build/liblfheap.so" >"$tmp/flags.log" 2>&1 &&
        flagged; then
    pass build-honours-cflags-ldflags
else
    tail -20 "$tmp/flags.log"
    fail build-honours-cflags-ldflags "no stack protector or a build id in the library"
fi
if make -s BUILD="$build" "$build/liblfheap.so" >"$tmp/flags.log" 2>&1 && ! flagged; then
    pass build-rebuilds-on-new-flags
else
    tail -20 "$tmp/flags.log"
    fail build-rebuilds-on-new-flags "the library kept the earlier flags"
fi

# make honours CC: the library built by clang passes the API test preloaded, also under
# memcheck, which must be able to read the library's debug information (valgrind 3.19
# gave up on clang's default DWARF 5). With the default CFLAGS, whatever flags the `make
# test` that runs this suite was given.
if command -v clang >/dev/null && command -v valgrind >/dev/null; then
    clang_lib=$tmp/clang/liblfheap.so
    if ! env -u MAKEFLAGS -u MFLAGS -u CFLAGS make -s CC=clang BUILD="$tmp/clang" "$clang_lib" \
            >"$tmp/clang.log" 2>&1; then
        tail -20 "$tmp/clang.log"
        fail clang-built-library-works "the build failed"
    elif ! LD_PRELOAD=$clang_lib build/t-plain/test_api >"$tmp/clang.log" 2>&1; then
        grep -v '^PASS ' "$tmp/clang.log" | head -20
        fail clang-built-library-works "test_api failed on it"
    elif ! LD_PRELOAD=$clang_lib valgrind -q --soname-synonyms=somalloc=nouse \
            --error-exitcode=99 build/t-plain/test_api >"$tmp/clang.log" 2>&1; then
        grep -v '^PASS ' "$tmp/clang.log" | head -20
        fail clang-built-library-works "test_api failed on it under memcheck"
    else
        pass clang-built-library-works
    fi
fi

# uninstall takes out every file install put in, and nothing else: a file of the
# program's own in the same directories stays.
touch "$libdir/other.so" "$dest/usr/include/other.h"
if make -s uninstall DESTDIR="$dest" PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu \
        >"$tmp/uninstall.log" 2>&1; then
    left=$(cd "$dest" && find . ! -type d | sort | tr '\n' ' ')
    if [ "$left" = "./usr/include/other.h ./usr/lib/x86_64-linux-gnu/other.so " ]; then
        pass uninstall-removes-what-install-put
    else
        fail uninstall-removes-what-install-put "left: $left"
    fi
else
    tail -20 "$tmp/uninstall.log"
    fail uninstall-removes-what-install-put "make uninstall failed"
fi
