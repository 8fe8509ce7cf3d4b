# Statistics and debug builds (tests/suites/statsdebug.sh). Test programs:
#   build/t-stats/NAME        linked with liblfheap-stats.a (lfh_* and standard names)
#   build/t-stats-debug/NAME  linked with liblfheap-stats-debug.a
#   build/t-debug/NAME        linked with liblfheap-debug.a
#   build/t-plain/test_debug  plain, -rdynamic (the preloaded library finds malloc_unfreed)
#   build/t{,-debug}/test_invariants  the invariant checks, in the tests' and debug builds
#   build/t-stats{,-debug}/test_report_env  the settings and exit reports of the archives
define statsdebug_rules
$(BUILD)/t-$(1)/%: tests/%.c $(BUILD)/liblfheap-$(1).a $(wildcard tests/*.h)
	@mkdir -p $$(@D)
	$$(CC) $$(TEST_CFLAGS) $$< -o $$@ $(BUILD)/liblfheap-$(1).a -lm
endef
$(foreach v,stats stats-debug debug,$(eval $(call statsdebug_rules,$(v))))
# test_invariants calls lfheap's internals (pagemap_set, heap_give_back), which the
# archive keeps local to its one object: it links the debug build's objects themselves.
$(BUILD)/t-debug/test_invariants: tests/test_invariants.c $(OBJS_debug) $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(OBJS_debug) -lm

$(BUILD)/t-plain/test_debug: tests/test_debug.c $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN -rdynamic $< -o $@

TEST_BINS += $(LLHEAP_VARIANTS) \
             $(BUILD)/t/test_stats $(BUILD)/t-stats/test_stats $(BUILD)/t-stats-debug/test_stats \
             $(BUILD)/t-debug/test_debug $(BUILD)/t-stats-debug/test_debug \
             $(BUILD)/t-plain/test_debug \
             $(BUILD)/t-stats-debug/test_sticky $(BUILD)/t-debug/test_sticky \
             $(BUILD)/t/test_invariants $(BUILD)/t-debug/test_invariants \
             $(BUILD)/t-stats/test_report_env $(BUILD)/t-stats-debug/test_report_env
