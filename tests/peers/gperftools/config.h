/* The configuration that gperftools' configure script would write for Linux x86-64 with
   glibc, reduced to what tests/peers/run.sh compiles of gperftools: three of its
   allocator tests, their helpers (tests/testutil.cc) and the headers those include
   (base/logging.h, base/basictypes.h, base/commandlineflags.h). Nothing of tcmalloc
   itself is compiled: the tests call malloc, and get glibc's or lfheap's. */
#ifndef GPERFTOOLS_CONFIG_H_
#define GPERFTOOLS_CONFIG_H_

#define HAVE_FCNTL_H                 1
#define HAVE_INTTYPES_H              1
#define HAVE_MALLOC_H                1
#define HAVE_MMAP                    1
#define HAVE_PTHREAD                 1
#define HAVE_STDINT_H                1
#define HAVE_SYS_RESOURCE_H          1
#define HAVE_SYS_SYSCALL_H           1
#define HAVE_SYS_TYPES_H             1
#define HAVE_TLS                     1
#define HAVE_UNISTD_H                1
#define HAVE___ATTRIBUTE__           1
#define HAVE___ATTRIBUTE__ALIGNED_FN 1
#define HAVE_BUILTIN_EXPECT          1
#define HAVE_DECL_MEMALIGN           1
#define HAVE_DECL_POSIX_MEMALIGN     1
#define HAVE_DECL_PVALLOC            1
#define HAVE_DECL_VALLOC             1
#define HAVE_DECL_CFREE              0
#define HAVE_POSIX_MEMALIGN          1
#define HAVE_STRUCT_MALLINFO         1

/* printf formats of size_t. */
#define PRIdS "zd"
#define PRIuS "zu"
#define PRIxS "zx"

#define PERFTOOLS_DLL_DECL

#endif
