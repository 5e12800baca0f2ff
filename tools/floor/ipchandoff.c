// ipchandoff: the C floor of TestGPUIPCHandOff, on the driver API alone. A producer
// fills buffer i of a ring of 4 (1 MiB each) with i+1 and records an event; the
// consumer waits on that event on its own stream, copies the buffer to host
// memory, checks every word, records its own event and acknowledges; the producer's
// next fill of that buffer waits on the consumer's event. Messages go over a Unix
// socket either way. Rounds alternate between the consumer as a second process (the
// buffers from an exported pool, each pointer imported and freed per hand-off,
// interprocess events) and as a second thread of this process (its own stream, the
// same buffers, ordinary events), and print the time per hand-off of each. With
// "pinned" the host memory is page-locked (cuMemAllocHost), else pageable (malloc).
//
//   gcc -O2 -o /tmp/ipchandoff tools/floor/ipchandoff.c -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64/stubs -lcuda -lpthread
//   /tmp/ipchandoff 5 2000; /tmp/ipchandoff 5 2000 pinned
#include "ipcfloor.h"
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
enum { SZ = 1 << 20, RING = 4 };
typedef struct { int k, i; CUmemPoolPtrExportData e; } msg;
static CUcontext ctx;
static int pinned;
static uint32_t* hostbuf(void) { void* p = NULL; if (pinned) CK(cuMemAllocHost(&p, SZ)); else p = malloc(SZ); return p; }
static void full(int fd, void* p, size_t n, int rd) {
	for (size_t d = 0; d < n;) {
		ssize_t r = rd ? read(fd, (char*)p + d, n - d) : write(fd, (char*)p + d, n - d);
		if (r <= 0) { fprintf(stderr, "socket %s failed\n", rd ? "read" : "write"); exit(2); }
		d += r;
	}
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// produce hands n buffers over from the from-th on; exported sends each pointer's
// export data for the consumer to import.
static void produce(int sock, CUstream s, CUdeviceptr* buf, CUevent* fill, CUevent* rel, int from, int n, int exported) {
	msg m;
	for (int j = 0; j < n; j++) {
		int i = from + j, k = i % RING;
		if (j >= RING) { full(sock, &m, sizeof m, 1); CK(cuStreamWaitEvent(s, rel[m.k], 0)); }
		CK(cuMemsetD32Async(buf[k], (unsigned)(i + 1), SZ / 4, s));
		CK(cuEventRecord(fill[k], s));
		memset(&m, 0, sizeof m); m.k = k; m.i = i;
		if (exported) CK(cuMemPoolExportPointer(&m.e, buf[k]));
		full(sock, &m, sizeof m, 0);
	}
	for (int j = 0; j < RING && j < n; j++) { full(sock, &m, sizeof m, 1); CK(cuStreamWaitEvent(s, rel[m.k], 0)); }
	CK(cuStreamSynchronize(s));
}

// consume takes n buffers; pool != 0 imports each pointer and frees it after use.
static void consume(int sock, CUstream s, CUmemoryPool pool, CUdeviceptr* buf, CUevent* fill, CUevent* rel, uint32_t* host, int n) {
	msg m;
	for (int j = 0; j < n; j++) {
		full(sock, &m, sizeof m, 1);
		CUdeviceptr p = buf ? buf[m.k] : 0;
		if (pool) CK(cuMemPoolImportPointer(&p, pool, &m.e));
		CK(cuStreamWaitEvent(s, fill[m.k], 0));
		CK(cuMemcpyDtoHAsync(host, p, SZ, s));
		CK(cuStreamSynchronize(s));
		for (int w = 0; w < SZ / 4; w++)
			if (host[w] != (uint32_t)(m.i + 1)) { fprintf(stderr, "hand-off %d: word %d is %u\n", m.i, w, host[w]); exit(5); }
		if (pool) CK(cuMemFreeAsync(p, s));
		CK(cuEventRecord(rel[m.k], s));
		full(sock, &m, sizeof m, 0);
	}
}

// The consumer process: imports the pool and the producer's events, sends its own.
static void child(int n, int pin) {
	pinned = pin;
	int sock = 3;
	CUdevice d; CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, d)); CK(cuCtxSetCurrent(ctx));
	CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	int fd = recvfd(sock);
	CUmemoryPool pool; CK(cuMemPoolImportFromShareableHandle(&pool, (void*)(long)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	close(fd);
	CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CK(cuMemPoolSetAccess(pool, &a, 1));
	CUevent fill[RING], rel[RING];
	for (int k = 0; k < RING; k++) {
		CUipcEventHandle h; full(sock, &h, sizeof h, 1); CK(cuIpcOpenEventHandle(&fill[k], h));
		CK(cuEventCreate(&rel[k], CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)); CK(cuIpcGetEventHandle(&h, rel[k])); full(sock, &h, sizeof h, 0);
	}
	uint32_t* host = hostbuf();
	consume(sock, s, pool, NULL, fill, rel, host, n);
	CK(cuStreamSynchronize(s));
	char done = 0; full(sock, &done, 1, 0); // the producer's events are not used past here
	full(sock, &done, 1, 1);
	exit(0);
}

typedef struct { int sock, n; CUdeviceptr* buf; CUevent *fill, *rel; } targ;
static void* consumer_thread(void* p) {
	targ* a = p; CK(cuCtxSetCurrent(ctx));
	CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint32_t* host = hostbuf();
	consume(a->sock, s, 0, a->buf, a->fill, a->rel, host, a->n);
	CK(cuStreamSynchronize(s)); CK(cuStreamDestroy(s));
	if (pinned) CK(cuMemFreeHost(host)); else free(host);
	return NULL;
}

static int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return (x > y) - (x < y); }

int main(int argc, char** argv) {
	if (argc > 3 && !strcmp(argv[1], "child")) child(atoi(argv[2]), atoi(argv[3]));
	int rounds = argc > 1 ? atoi(argv[1]) : 5, n = argc > 2 ? atoi(argv[2]) : 2000;
	pinned = argc > 3 && !strcmp(argv[3], "pinned");
	if (rounds < 1 || rounds > 64 || n < RING) { fprintf(stderr, "usage: ipchandoff ROUNDS N (N >= %d)\n", RING); return 1; }
	CUdevice d; CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, d)); CK(cuCtxSetCurrent(ctx));
	CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUmemPoolProps pp = {0}; pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE; pp.location.id = 0;
	CUmemoryPool pool; CK(cuMemPoolCreate(&pool, &pp));
	CUdeviceptr buf[RING];
	for (int k = 0; k < RING; k++) CK(cuMemAllocFromPoolAsync(&buf[k], SZ, pool, s));
	CK(cuStreamSynchronize(s));

	int sv[2]; if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
	char ns[16]; snprintf(ns, sizeof ns, "%d", rounds * n);
	pid_t pid = fork();
	if (pid == 0) { dup2(sv[1], 3); execl("/proc/self/exe", argv[0], "child", ns, pinned ? "1" : "0", (char*)NULL); _exit(9); }
	close(sv[1]);
	int fd; CK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	sendfd(sv[0], fd); close(fd);
	CUevent pfill[RING], prel[RING], tfill[RING], trel[RING];
	for (int k = 0; k < RING; k++) {
		CUipcEventHandle h;
		CK(cuEventCreate(&pfill[k], CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)); CK(cuIpcGetEventHandle(&h, pfill[k])); full(sv[0], &h, sizeof h, 0);
		full(sv[0], &h, sizeof h, 1); CK(cuIpcOpenEventHandle(&prel[k], h));
		CK(cuEventCreate(&tfill[k], CU_EVENT_DISABLE_TIMING)); CK(cuEventCreate(&trel[k], CU_EVENT_DISABLE_TIMING));
	}
	double proc[64], thr[64];
	for (int r = 0; r < rounds; r++) {
		int tv[2]; if (socketpair(AF_UNIX, SOCK_STREAM, 0, tv)) return 1;
		targ a = {tv[1], n, buf, tfill, trel};
		double t0 = now();
		pthread_t th; pthread_create(&th, NULL, consumer_thread, &a);
		produce(tv[0], s, buf, tfill, trel, 0, n, 0);
		pthread_join(th, NULL);
		thr[r] = (now() - t0) / n * 1e6;
		close(tv[0]); close(tv[1]);
		t0 = now();
		produce(sv[0], s, buf, pfill, prel, r * n, n, 1);
		proc[r] = (now() - t0) / n * 1e6;
	}
	char done; full(sv[0], &done, 1, 1); // the consumer is done with our events and pool
	for (int k = 0; k < RING; k++) { CK(cuEventDestroy(prel[k])); CK(cuEventDestroy(pfill[k])); }
	full(sv[0], &done, 1, 0);
	waitpid(pid, NULL, 0);
	for (int k = 0; k < RING; k++) CK(cuMemFreeAsync(buf[k], s));
	CK(cuStreamSynchronize(s)); CK(cuMemPoolDestroy(pool));
	printf("µs per hand-off of %d bytes to %s memory: between processes", SZ, pinned ? "pinned" : "pageable");
	for (int r = 0; r < rounds; r++) printf(" %.1f", proc[r]);
	printf("; between two threads' streams");
	for (int r = 0; r < rounds; r++) printf(" %.1f", thr[r]);
	double p2[64], t2[64]; memcpy(p2, proc, sizeof proc); memcpy(t2, thr, sizeof thr);
	qsort(p2, rounds, sizeof(double), cmp); qsort(t2, rounds, sizeof(double), cmp);
	printf("\nmedians: %.1f between processes, %.1f between threads: %.2fx\n", p2[rounds / 2], t2[rounds / 2], p2[rounds / 2] / t2[rounds / 2]);
	return 0;
}
