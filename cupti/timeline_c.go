package cupti

// The C side of the timeline: CUPTI's buffer callbacks and the push and pop of a Go
// call's id around the driver calls it makes. The callbacks run on CUPTI's threads
// (or the thread that flushes) and never call Go: a completed buffer goes on a list
// under a C mutex, which Stop drains, so no CUPTI thread ever waits on the Go
// runtime, and no Go code runs while CUPTI holds its own locks.

/*
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct gocupti_buf {
	struct gocupti_buf* next;
	uint8_t* data;
	size_t valid;
} gocupti_buf;

static pthread_mutex_t gocupti_mu = PTHREAD_MUTEX_INITIALIZER;
static gocupti_buf *gocupti_head, *gocupti_tail;
static uint64_t gocupti_lost; // buffers CUPTI could not be given or that could not be kept

enum { GOCUPTI_BUF_SIZE = 4 << 20, GOCUPTI_EXTERNAL_KIND = 3 }; // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

static void gocupti_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
	void* p = NULL;
	if (posix_memalign(&p, 8, GOCUPTI_BUF_SIZE) != 0) {
		p = NULL;
		pthread_mutex_lock(&gocupti_mu);
		gocupti_lost++;
		pthread_mutex_unlock(&gocupti_mu);
	}
	*buffer = (uint8_t*)p;
	*size = p ? GOCUPTI_BUF_SIZE : 0;
	*max_records = 0; // as many as fit
}

static void gocupti_completed(void* ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
	(void)ctx; (void)stream; (void)size;
	gocupti_buf* b = valid ? malloc(sizeof *b) : NULL;
	pthread_mutex_lock(&gocupti_mu);
	if (b == NULL) {
		if (valid) gocupti_lost++;
		pthread_mutex_unlock(&gocupti_mu);
		free(buffer);
		return;
	}
	b->next = NULL;
	b->data = buffer;
	b->valid = valid;
	if (gocupti_tail) gocupti_tail->next = b; else gocupti_head = b;
	gocupti_tail = b;
	pthread_mutex_unlock(&gocupti_mu);
}

static uintptr_t gocupti_requested_fn(void) { return (uintptr_t)gocupti_requested; }
static uintptr_t gocupti_completed_fn(void) { return (uintptr_t)gocupti_completed; }

// gocupti_take hands the completed buffers over (the caller frees each with
// gocupti_free) and the count of lost ones.
static gocupti_buf* gocupti_take(uint64_t* lost) {
	pthread_mutex_lock(&gocupti_mu);
	gocupti_buf* h = gocupti_head;
	gocupti_head = gocupti_tail = NULL;
	*lost = gocupti_lost;
	gocupti_lost = 0;
	pthread_mutex_unlock(&gocupti_mu);
	return h;
}

static gocupti_buf* gocupti_free(gocupti_buf* b) {
	gocupti_buf* next = b->next;
	free(b->data);
	free(b);
	return next;
}

// gocupti_push reads CUPTI's clock and pushes id as the thread's external
// correlation id, in one call into C: the driver calls that follow on this thread,
// until gocupti_pop, carry it.
static uint64_t gocupti_push(uintptr_t push, uintptr_t now, uint64_t id) {
	uint64_t t = 0;
	((int (*)(uint64_t*))now)(&t);
	((int (*)(int, uint64_t))push)(GOCUPTI_EXTERNAL_KIND, id);
	return t;
}

static uint64_t gocupti_pop(uintptr_t pop, uintptr_t now) {
	uint64_t last = 0, t = 0;
	((int (*)(int, uint64_t*))pop)(GOCUPTI_EXTERNAL_KIND, &last);
	((int (*)(uint64_t*))now)(&t);
	return t;
}
*/
import "C"

import (
	"unsafe"

	"github.com/gocuda/gocuda/cupti/cuptiraw"
)

// The CUPTI functions the push and pop call from C, resolved by Start.
var (
	procPush = cuptiraw.Library().NewProc("cuptiActivityPushExternalCorrelationId")
	procPop  = cuptiraw.Library().NewProc("cuptiActivityPopExternalCorrelationId")
	procNow  = cuptiraw.Library().NewProc("cuptiGetTimestamp")
)

// cCorrelation is the push and pop through CUPTI, at the addresses Start resolved.
type cCorrelation struct{ push, pop, now uintptr }

func (c cCorrelation) begin(id uint64) int64 {
	return int64(C.gocupti_push(C.uintptr_t(c.push), C.uintptr_t(c.now), C.uint64_t(id)))
}

func (c cCorrelation) end() int64 {
	return int64(C.gocupti_pop(C.uintptr_t(c.pop), C.uintptr_t(c.now)))
}

// registerBuffers hands CUPTI the C callbacks.
func registerBuffers() error {
	return cuptiraw.ActivityRegisterCallbacks(cuptiraw.CUpti_BuffersCallbackRequestFunc(C.gocupti_requested_fn()),
		cuptiraw.CUpti_BuffersCallbackCompleteFunc(C.gocupti_completed_fn()))
}

// drain decodes every completed buffer's records into b and frees the buffers.
func drain(b *builder) {
	var lost C.uint64_t
	for buf := C.gocupti_take(&lost); buf != nil; buf = C.gocupti_free(buf) {
		var rec *cuptiraw.CUpti_Activity
		for cuptiraw.ActivityGetNextRecord((*uint8)(unsafe.Pointer(buf.data)), uint64(buf.valid), &rec) == nil {
			b.add(unsafe.Pointer(rec))
		}
	}
	b.dropped += uint64(lost)
}
