# Signal handlers, threads killed inside lfheap, valgrind's memcheck (issue 6):
#   build/t-plain/test_signals   run with lfheap preloaded, and without it (glibc contrast)
#   build/t-linked/test_signals  linked with build/liblfheap.a
#   build/t-plain/test_memcheck  errors memcheck must find in lfheap's blocks
# run by tests/suites/signals.sh and tests/suites/memcheck.sh; `make test-long` runs the
# million-signal variant.
$(BUILD)/t-linked/%: tests/%.c $(BUILD)/liblfheap.a $(wildcard tests/*.h) src/sigwrap.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN $< -o $@ $(BUILD)/liblfheap.a -lm

$(BUILD)/t-plain/test_signals: src/sigwrap.h

TEST_BINS += $(BUILD)/t-plain/test_signals $(BUILD)/t-linked/test_signals

.PHONY: test-long signals-long
test-long: signals-long
signals-long: all $(BUILD)/t-plain/test_signals $(BUILD)/t-linked/test_signals
	LD_PRELOAD=$(CURDIR)/$(BUILD)/liblfheap.so $(BUILD)/t-plain/test_signals 1000000 400
	$(BUILD)/t-linked/test_signals 200000 200

TEST_BINS += $(BUILD)/t-plain/test_memcheck
