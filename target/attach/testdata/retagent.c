// retagent is a minimal JVMTI agent for the attach tests: Agent_OnAttach
// returns the integer given as its options, so tests can check how LoadAgent
// reports both success and a nonzero agent return code. It needs no JDK
// headers so the tests can build it with any C compiler.
#include <stdlib.h>

__attribute__((visibility("default"))) int Agent_OnAttach(void *vm, char *options, void *reserved) {
    (void)vm;
    (void)reserved;
    return options ? atoi(options) : 0;
}
