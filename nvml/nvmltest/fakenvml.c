// fakenvml.c is a fake libnvidia-ml.so.1 for the tests of package nvml without a GPU
// (CI). It builds with plain gcc, without nvml.h: the few types and values it needs
// are copied from nvml.h (NVML 13, CUDA 13.0), and the layout tests of nvmlraw check
// those against the header where it is present.
//
// It knows FAKENVML_DEVICES devices (default 2); FAKENVML_OLD=1 makes it an older
// driver, which refuses the newest struct versions. Device i matches the fake CUDA
// driver's device i (cuda/cudatest/fakecuda.c): the UUID bytes "fakecuda" then zeros
// and i in the last byte, PCI bus i+1. NVML's Init count is checked (a call before
// nvmlInit, or one nvmlShutdown too many, fails as NVML does); event sets are counted
// (fakenvml_live_sets) and fakenvml_inject delivers an event to every set registered
// for it, which nvmlEventSetWait_v2 returns.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_UNKNOWN = 999,
};

#define MAXDEV 8
#define MAXSETS 64
#define QLEN 64

typedef struct {
	int index;
	unsigned char uuid[16];
	unsigned long long registered; // event types registered on any set (unused)
} device;

typedef struct {
	void *device;
	unsigned long long eventType;
	unsigned long long eventData;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct set {
	int live;
	unsigned long long types[MAXDEV];
	nvmlEventData_t q[QLEN];
	int head, n;
} set;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int inits;
static int ndev = -1;
static device devs[MAXDEV];
static set sets[MAXSETS];
static int nosupport_uuid; // control: nvmlDeviceGetHandleByUUID finds nothing

static void setup(void) {
	if (ndev >= 0) return;
	const char *e = getenv("FAKENVML_DEVICES");
	ndev = e != NULL ? atoi(e) : 2;
	if (ndev < 0) ndev = 0;
	if (ndev > MAXDEV) ndev = MAXDEV;
	for (int i = 0; i < MAXDEV; i++) {
		devs[i].index = i;
		memcpy(devs[i].uuid, "fakecuda", 8);
		devs[i].uuid[15] = (unsigned char)i;
	}
}

#define CHECK_INIT() do { if (inits == 0) { pthread_mutex_unlock(&mu); return NVML_ERROR_UNINITIALIZED; } } while (0)
#define LOCKED_INIT() do { pthread_mutex_lock(&mu); setup(); CHECK_INIT(); } while (0)
#define RET(r) do { pthread_mutex_unlock(&mu); return (r); } while (0)

static int old_driver(void) {
	const char *e = getenv("FAKENVML_OLD");
	return e != NULL && strcmp(e, "1") == 0;
}

static device *dev_of(void *d) {
	for (int i = 0; i < ndev; i++)
		if (d == (void *)&devs[i]) return &devs[i];
	return NULL;
}

#define DEV(d, p) device *p = dev_of(d); if (p == NULL) RET(NVML_ERROR_INVALID_ARGUMENT)

static void uuid_string(device *d, char *buf, size_t n) {
	const unsigned char *u = d->uuid;
	snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static nvmlReturn_t copy_string(const char *s, char *buf, unsigned int len) {
	if (buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(buf, s);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { pthread_mutex_lock(&mu); setup(); inits++; RET(NVML_SUCCESS); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	inits--;
	RET(NVML_SUCCESS);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r) { return r == NVML_SUCCESS ? "Success" : "fake NVML error"; }

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) { LOCKED_INIT(); RET(copy_string("580.00.fake", v, len)); }
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int len) { LOCKED_INIT(); RET(copy_string("13.580.00.fake", v, len)); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
	LOCKED_INIT();
	if (v == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*v = 13000;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
	LOCKED_INIT();
	if (n == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*n = (unsigned int)ndev;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
	LOCKED_INIT();
	if (d == NULL || i >= (unsigned int)ndev) RET(NVML_ERROR_INVALID_ARGUMENT);
	*d = &devs[i];
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **d) {
	LOCKED_INIT();
	if (uuid == NULL || d == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (nosupport_uuid) RET(NVML_ERROR_NOT_FOUND);
	for (int i = 0; i < ndev; i++) {
		char buf[96];
		uuid_string(&devs[i], buf, sizeof buf);
		if (strcmp(buf, uuid) == 0) {
			*d = &devs[i];
			RET(NVML_SUCCESS);
		}
	}
	RET(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d) {
	LOCKED_INIT();
	if (id == NULL || d == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	unsigned int dom, bus, dv, fn;
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dv, &fn) != 4) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (dom == 0 && dv == 0 && fn == 0 && bus >= 1 && bus <= (unsigned int)ndev) {
		*d = &devs[bus - 1];
		RET(NVML_SUCCESS);
	}
	RET(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(void *d, unsigned int *i) {
	LOCKED_INIT();
	DEV(d, p);
	if (i == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*i = (unsigned int)p->index;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(void *d, char *name, unsigned int len) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	RET(copy_string("Fake NVML GPU", name, len));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(void *d, char *uuid, unsigned int len) {
	LOCKED_INIT();
	DEV(d, p);
	char buf[96];
	uuid_string(p, buf, sizeof buf);
	RET(copy_string(buf, uuid, len));
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *d, nvmlPciInfo_t *pci) {
	LOCKED_INIT();
	DEV(d, p);
	if (pci == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	memset(pci, 0, sizeof *pci);
	pci->bus = (unsigned int)p->index + 1;
	pci->pciDeviceId = 0x233510de;
	snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02x:00.0", pci->bus);
	snprintf(pci->busId, sizeof pci->busId, "00000000:%02x:00.0", pci->bus);
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(void *d, nvmlUtilization_t *u) {
	LOCKED_INIT();
	DEV(d, p);
	if (u == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	u->gpu = 40 + (unsigned int)p->index;
	u->memory = 20;
	RET(NVML_SUCCESS);
}

#define GiB (1ULL << 30)

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *d, nvmlMemory_v2_t *m) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (m == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (old_driver() || m->version != ((unsigned int)sizeof(nvmlMemory_v2_t) | (2u << 24))) RET(25); // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
	m->total = 80 * GiB;
	m->reserved = GiB / 2;
	m->used = 10 * GiB;
	m->free = m->total - m->reserved - m->used;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(void *d, nvmlMemory_t *m) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (m == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	m->total = 80 * GiB;
	m->used = 10 * GiB + GiB / 2;
	m->free = m->total - m->used;
	RET(NVML_SUCCESS);
}

// nvmlClockType_t: graphics 0, SM 1, memory 2, video 3.
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(void *d, int type, unsigned int *mhz) {
	static const unsigned int cur[] = {1755, 1755, 2619, 1590};
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (mhz == NULL || type < 0 || type > 3) RET(NVML_ERROR_INVALID_ARGUMENT);
	*mhz = cur[type];
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(void *d, int type, unsigned int *mhz) {
	static const unsigned int max[] = {1980, 1980, 2619, 1965};
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (mhz == NULL || type < 0 || type > 3) RET(NVML_ERROR_INVALID_ARGUMENT);
	*mhz = max[type];
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (mw == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*mw = 123456;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(void *d, unsigned int *mw) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (mw == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*mw = 700000;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (mj == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*mj = 987654321ULL;
	RET(NVML_SUCCESS);
}

// nvmlDeviceGetTemperature, deprecated in 13.0: what older drivers answer (with
// FAKENVML_OLD=1, nvmlDeviceGetTemperatureV and nvmlDeviceGetMemoryInfo_v2 refuse the
// struct versions, as a driver that knows older ones does).
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(void *d, int sensor, unsigned int *c) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (c == NULL || sensor != 0) RET(NVML_ERROR_INVALID_ARGUMENT);
	*c = 41;
	RET(NVML_SUCCESS);
}

typedef struct {
	unsigned int version;
	int sensorType;
	int temperature;
} nvmlTemperature_v1_t;

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(void *d, nvmlTemperature_v1_t *t) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (t == NULL || t->sensorType != 0) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (old_driver() || t->version != ((unsigned int)sizeof(nvmlTemperature_v1_t) | (1u << 24))) RET(25); // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
	t->temperature = 41;
	RET(NVML_SUCCESS);
}

// nvmlTemperatureThresholds_t: shutdown 0, slowdown 1, mem max 2, gpu max 3.
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(void *d, int which, unsigned int *c) {
	static const unsigned int th[] = {92, 89, 95, 87};
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (c == NULL || which < 0) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (which > 3) RET(NVML_ERROR_NOT_SUPPORTED);
	*c = th[which];
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(void *d, int *current, int *pending) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (current == NULL || pending == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*current = 1;
	*pending = 1;
	RET(NVML_SUCCESS);
}

// errorType: corrected 0, uncorrected 1; counterType: volatile 0, aggregate 1.
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(void *d, int errorType, int counterType, unsigned long long *n) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (n == NULL || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1) RET(NVML_ERROR_INVALID_ARGUMENT);
	*n = (unsigned long long)(errorType == 0 ? 3 : 0) * (counterType == 0 ? 1 : 7);
	RET(NVML_SUCCESS);
}

// Retired pages: Hopper reports none (row remapping replaced it): not supported.
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(void *d, int cause, unsigned int *count, unsigned long long *addrs) {
	LOCKED_INIT();
	DEV(d, p);
	(void)cause; (void)addrs;
	if (count == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (p->index == 0) RET(NVML_ERROR_NOT_SUPPORTED);
	// Device 1: one page retired for double-bit errors.
	unsigned int have = cause == 1 ? 1 : 0;
	if (addrs == NULL || *count < have) {
		*count = have;
		RET(have == 0 || addrs != NULL ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
	}
	if (have) addrs[0] = 0x1234000ULL;
	*count = have;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(void *d, int *pending) {
	LOCKED_INIT();
	DEV(d, p);
	if (pending == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (p->index == 0) RET(NVML_ERROR_NOT_SUPPORTED);
	*pending = 0;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(void *d, unsigned int *corr, unsigned int *unc, unsigned int *pending, unsigned int *failed) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (corr == NULL || unc == NULL || pending == NULL || failed == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*corr = 2;
	*unc = 0;
	*pending = 0;
	*failed = 0;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (r == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*r = 0x1 | 0x4; // GPU idle, SW power cap
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(void *d, unsigned int *current, unsigned int *pending) {
	LOCKED_INIT();
	DEV(d, p);
	if (current == NULL || pending == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*current = 0;
	*pending = p->index == 1 ? 1 : 0;
	RET(NVML_SUCCESS);
}

#define XID 0x8ULL // nvmlEventTypeXidCriticalError
#define SUPPORTED (0x1ULL | 0x2ULL | 0x4ULL | XID)

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(void *d, unsigned long long *types) {
	LOCKED_INIT();
	DEV(d, p);
	(void)p;
	if (types == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	*types = SUPPORTED;
	RET(NVML_SUCCESS);
}

static set *set_of(void *s) {
	for (int i = 0; i < MAXSETS; i++)
		if (s == (void *)&sets[i] && sets[i].live) return &sets[i];
	return NULL;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(void **s) {
	LOCKED_INIT();
	if (s == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	for (int i = 0; i < MAXSETS; i++) {
		if (!sets[i].live) {
			memset(&sets[i], 0, sizeof sets[i]);
			sets[i].live = 1;
			*s = &sets[i];
			RET(NVML_SUCCESS);
		}
	}
	RET(NVML_ERROR_MEMORY);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *s) {
	LOCKED_INIT();
	DEV(d, p);
	set *st = set_of(s);
	if (st == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	if ((types & ~SUPPORTED) != 0) RET(NVML_ERROR_NOT_SUPPORTED);
	st->types[p->index] |= types;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(void *s, nvmlEventData_t *data, unsigned int timeoutms) {
	LOCKED_INIT();
	set *st = set_of(s);
	if (st == NULL || data == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeoutms / 1000;
	deadline.tv_nsec += (long)(timeoutms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while (st->n == 0 && st->live) {
		if (pthread_cond_timedwait(&cond, &mu, &deadline) == ETIMEDOUT) break;
	}
	if (!st->live) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (st->n == 0) RET(NVML_ERROR_TIMEOUT);
	*data = st->q[st->head];
	st->head = (st->head + 1) % QLEN;
	st->n--;
	RET(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlEventSetFree(void *s) {
	LOCKED_INIT();
	set *st = set_of(s);
	if (st == NULL) RET(NVML_ERROR_INVALID_ARGUMENT);
	st->live = 0;
	pthread_cond_broadcast(&cond);
	RET(NVML_SUCCESS);
}

// ---- control API (package nvmltest) ----

// fakenvml_inject delivers an event of type types to every live set that registered
// it on device dev, with data (the Xid for nvmlEventTypeXidCriticalError). It returns
// the number of sets that received it.
EXPORT int fakenvml_inject(int dev, unsigned long long type, unsigned long long data) {
	pthread_mutex_lock(&mu);
	setup();
	int got = 0;
	if (dev >= 0 && dev < ndev) {
		for (int i = 0; i < MAXSETS; i++) {
			set *st = &sets[i];
			if (!st->live || (st->types[dev] & type) == 0 || st->n == QLEN) continue;
			nvmlEventData_t *e = &st->q[(st->head + st->n) % QLEN];
			memset(e, 0, sizeof *e);
			e->device = &devs[dev];
			e->eventType = type;
			e->eventData = data;
			e->gpuInstanceId = 0xFFFFFFFFu;
			e->computeInstanceId = 0xFFFFFFFFu;
			st->n++;
			got++;
		}
	}
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&mu);
	return got;
}

// fakenvml_live_sets returns the number of event sets not freed.
EXPORT int fakenvml_live_sets(void) {
	pthread_mutex_lock(&mu);
	int n = 0;
	for (int i = 0; i < MAXSETS; i++) n += sets[i].live;
	pthread_mutex_unlock(&mu);
	return n;
}

// fakenvml_inits returns NVML's Init count (Inits less Shutdowns).
EXPORT int fakenvml_inits(void) {
	pthread_mutex_lock(&mu);
	int n = inits;
	pthread_mutex_unlock(&mu);
	return n;
}

// fakenvml_uuid_lookup turns nvmlDeviceGetHandleByUUID off (0) or on (1), so that the
// PCI bus id fallback is taken.
EXPORT void fakenvml_uuid_lookup(int on) {
	pthread_mutex_lock(&mu);
	nosupport_uuid = !on;
	pthread_mutex_unlock(&mu);
}
