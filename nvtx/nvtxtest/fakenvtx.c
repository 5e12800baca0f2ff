// A stand-in for a tool's NVTX injection library (Nsight's): it takes the domain
// functions of the NVTX core2 module and records each call, for the nvtx package's
// tests to read (fakenvtx_count, fakenvtx_get).
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef void (*fn)(void);
typedef struct {
	size_t struct_size;
	int (*GetModuleFunctionTable)(int module, fn*** out_table, unsigned int* out_size);
} callbacks;
typedef struct {
	uint16_t version, size;
	uint32_t category;
	int32_t colorType;
	uint32_t color;
	int32_t payloadType;
	int32_t reserved0;
	uint64_t payload;
	int32_t messageType;
	const void* message;
} attrs;

// fakenvtx_event is one recorded call.
typedef struct {
	int32_t kind; // 1 range start, 2 range end, 3 mark, 4 category name
	int32_t color_type;
	uint64_t id;  // the range's
	uint64_t tid; // the OS thread of the call
	uint32_t color, category;
	int32_t payload_type, version;
	uint64_t payload;
	char domain[64], name[64];
} fakenvtx_event;

#define MAX_EVENTS 65536
static fakenvtx_event events[MAX_EVENTS];
static int64_t n_events;
static uint64_t next_id;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void record(int kind, const char* domain, const char* name, const attrs* a, uint64_t id) {
	pthread_mutex_lock(&mu);
	if (n_events < MAX_EVENTS) {
		fakenvtx_event* e = &events[n_events++];
		memset(e, 0, sizeof *e);
		e->kind = kind;
		e->id = id;
		e->tid = (uint64_t)syscall(SYS_gettid);
		strncpy(e->domain, domain ? domain : "", sizeof e->domain - 1);
		strncpy(e->name, name ? name : "", sizeof e->name - 1);
		if (a) {
			e->version = a->version;
			e->color_type = a->colorType;
			e->color = a->color;
			e->category = a->category;
			e->payload_type = a->payloadType;
			e->payload = a->payload;
		}
	}
	pthread_mutex_unlock(&mu);
}

// Domains and registered strings are copies of their names: their handles.
static void* domain_create(const char* name) { return strdup(name); }
static void* register_string(void* d, const char* s) { (void)d; return strdup(s); }

static const char* message(const attrs* a) {
	return a && a->messageType == 3 ? (const char*)a->message : a && a->messageType == 1 ? (const char*)a->message : "";
}

static uint64_t range_start(void* d, const attrs* a) {
	pthread_mutex_lock(&mu);
	uint64_t id = ++next_id;
	pthread_mutex_unlock(&mu);
	record(1, (const char*)d, message(a), a, id);
	return id;
}
static void range_end(void* d, uint64_t id) { record(2, (const char*)d, "", NULL, id); }
static void mark(void* d, const attrs* a) { record(3, (const char*)d, message(a), a, 0); }
static void name_category(void* d, uint32_t id, const char* name) {
	attrs a = {0};
	a.category = id;
	record(4, (const char*)d, name, &a, 0);
}

int InitializeInjectionNvtx2(const void* (*get_export_table)(uint32_t)) {
	const callbacks* cb = (const callbacks*)get_export_table(1);
	if (cb == NULL) return 0;
	// It asks for every module's table and refuses to start when one is missing or
	// of another size than NVTX's: Nsight Compute took no range until every module
	// was offered.
	static const unsigned int sizes[7] = {0, 16, 9, 15, 7, 16, 7};
	fn** t = NULL;
	unsigned int size = 0;
	for (int m = 1; m < 7; m++)
		if (!cb->GetModuleFunctionTable(m, &t, &size) || size != sizes[m]) return 0;
	if (!cb->GetModuleFunctionTable(5, &t, &size)) return 0;
	*t[1] = (fn)mark;
	*t[2] = (fn)range_start;
	*t[3] = (fn)range_end;
	*t[8] = (fn)name_category;
	*t[10] = (fn)register_string;
	*t[12] = (fn)domain_create;
	return 1;
}

int64_t fakenvtx_count(void) {
	pthread_mutex_lock(&mu);
	int64_t n = n_events;
	pthread_mutex_unlock(&mu);
	return n;
}

int fakenvtx_get(int64_t i, fakenvtx_event* out) {
	pthread_mutex_lock(&mu);
	int ok = i >= 0 && i < n_events;
	if (ok) *out = events[i];
	pthread_mutex_unlock(&mu);
	return ok ? 0 : -1;
}
