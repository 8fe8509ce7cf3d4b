# Signal handlers, threads killed inside lfheap, valgrind's memcheck (issue 6):
#   build/t-plain/test_signals   run with lfheap preloaded, and without it (glibc contrast)
#   build/t-linked/test_signals  linked with build/liblfheap.a
#   build/t-plain/test_memcheck  errors memcheck must find in lfheap's blocks
# run by tests/suites/signals.sh and tests/suites/memcheck.sh. The suites' long variant
# (LFHEAP_TEST_LONG=1: a million signals per variant) runs under `make test-long` where
# the Makefile defines it, and alone with `make signals-long`.
$(BUILD)/t-linked/%: tests/%.c $(BUILD)/liblfheap.a $(wildcard tests/*.h) src/sigwrap.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN $< -o $@ $(BUILD)/liblfheap.a -lm

$(BUILD)/t-plain/test_signals: src/sigwrap.h

TEST_BINS += $(BUILD)/t-plain/test_signals $(BUILD)/t-linked/test_signals

.PHONY: signals-long
signals-long: all $(BUILD)/t-plain/test_signals $(BUILD)/t-linked/test_signals
	LFHEAP_TEST_LONG=1 bash tests/suites/signals.sh

TEST_BINS += $(BUILD)/t-plain/test_memcheck
