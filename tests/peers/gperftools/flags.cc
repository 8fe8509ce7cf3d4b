// The one command-line flag that gperftools' base/logging.h declares and the tests
// compiled by tests/peers/run.sh refer to (through CHECK and VLOG): gperftools defines
// it in its logging.cc, which the tests need nothing else of.
#include <config.h>

#include "base/commandlineflags.h"

DEFINE_int32(verbose, 0, "verbosity of gperftools' logging macros");
