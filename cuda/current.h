// Shared by the cgo preambles of package cuda (launch_c.go, copy_c.go, olddriver.go).
#include <stdint.h>

// gocuda_make_current makes ctx current if it is not, as the generated in-context
// calls do: 0, or 1<<32 | the CUresult of the failed cuCtxGetCurrent (get) or
// cuCtxSetCurrent (set).
static inline int64_t gocuda_make_current(uintptr_t get, uintptr_t set, uintptr_t ctx) {
	uintptr_t cur = 0;
	int32_t s = ((int32_t (*)(uintptr_t*))get)(&cur);
	if (s == 0 && cur != ctx) s = ((int32_t (*)(uintptr_t))set)(ctx);
	return s ? (((int64_t)1 << 32) | (uint32_t)s) : 0;
}
