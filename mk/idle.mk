# Idle programs (tests/suites/idle.sh): the background purger, LFHEAP_BACKGROUND.
#   build/t-plain/test_idle   run with the release library preloaded
#   build/t-stats/test_idle   linked with liblfheap-stats.a: the purger sets up no cache
#   build/t-fault/test_idle   with the failure-injection library: refused thread starts
TEST_BINS += $(BUILD)/t-plain/test_idle $(BUILD)/t-stats/test_idle $(BUILD)/t-fault/test_idle
