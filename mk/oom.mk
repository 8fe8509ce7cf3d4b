# Out of memory (tests/suites/oom.sh): tests/NAME.c becomes build/t-fault/NAME, linked
# with the failure-injection variant of the prefixed library (LFHEAP_FAULT_INJECTION).
$(BUILD)/t-fault/%: tests/%.c $(BUILD)/liblfheap-fault.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DLFHEAP_FAULT_INJECTION $< -o $@ $(BUILD)/liblfheap-fault.a -lm

TEST_BINS += $(BUILD)/t-fault/test_oom $(BUILD)/t-plain/test_ulimit
