// ipcimport: what an importer of another process's memory pool gets back, on the
// driver API alone. Each round starts an exporter (this program again, with "child";
// fd 3 the socket) that creates a pool, sends it (SCM_RIGHTS) and k buffers of 1 MiB
// from it; the importer imports the pool and the buffers, reads one, frees them, trims
// and destroys the pool, and the exporter exits (mode C) or is killed after the
// import (mode K); S is C with cuMemPoolSetAccess on the imported pool, F is C with
// the pool's descriptor left open, E is C with the exporter's interprocess event opened
// (cuIpcOpenEventHandle), waited on and destroyed, as IPCImport does. The importer prints its device's free memory, relative to before
// the first round, after each import and at each round's end.
//
//   gcc -O1 -o /tmp/ipcimport tools/floor/ipcimport.c -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64/stubs -lcuda
//   /tmp/ipcimport C 3 4; /tmp/ipcimport K 2 4; /tmp/ipcimport E 3 4
#include "ipcfloor.h"
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
enum { SZ = 1 << 20 };
static long freemb(long f0) { size_t f, t; CK(cuMemGetInfo(&f, &t)); return ((long)f - f0) >> 20; }
static void child(int k) {
	int s = 3; char go;
	CUdevice d; CUcontext ctx; CUstream st; CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, d)); CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	CUmemPoolProps p = {0}; p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0;
	CUmemoryPool pool; CK(cuMemPoolCreate(&pool, &p)); int fd; CK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	sendfd(s, fd); close(fd);
	CUdeviceptr b[256];
	for (int i = 0; i < k; i++) { CK(cuMemAllocFromPoolAsync(&b[i], SZ, pool, st)); CK(cuMemsetD32Async(b[i], i, SZ / 4, st)); }
	CUevent ev; CK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)); CK(cuEventRecord(ev, st));
	CUipcEventHandle eh; CK(cuIpcGetEventHandle(&eh, ev)); if (write(s, &eh, sizeof eh) != sizeof eh) exit(5);
	CK(cuStreamSynchronize(st));
	for (int i = 0; i < k; i++) { CUmemPoolPtrExportData e; CK(cuMemPoolExportPointer(&e, b[i])); if (write(s, &e, sizeof e) != sizeof e) exit(5); }
	if (read(s, &go, 1) != 1) exit(6);
	for (int i = 0; i < k; i++) CK(cuMemFreeAsync(b[i], st));
	CK(cuStreamSynchronize(st)); CK(cuEventDestroy(ev)); CK(cuMemPoolDestroy(pool)); CK(cuDevicePrimaryCtxRelease(d));
	exit(0);
}
int main(int argc, char** argv) {
	if (argc > 2 && !strcmp(argv[1], "child")) child(atoi(argv[2]));
	char mode = argv[1][0]; int rounds = atoi(argv[2]), k = atoi(argv[3]);
	CUdevice d; CUcontext ctx; CUstream s; CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, d)); CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr tmp; CK(cuMemAlloc(&tmp, 4)); CK(cuMemFree(tmp)); CK(cuCtxSynchronize());
	size_t f0_, t_; CK(cuMemGetInfo(&f0_, &t_)); long f0 = (long)f0_;
	for (int r = 0; r < rounds; r++) {
		int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		pid_t pid = fork();
		if (pid == 0) { dup2(sv[1], 3); char ks[16]; snprintf(ks, sizeof ks, "%d", k); execl("/proc/self/exe", argv[0], "child", ks, (char*)NULL); _exit(9); }
		close(sv[1]);
		int fd = recvfd(sv[0]);
		CUmemoryPool pool; CK(cuMemPoolImportFromShareableHandle(&pool, (void*)(long)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
		if (mode == 'S') { // the access the importer's Go side sets
			CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
			CK(cuMemPoolSetAccess(pool, &a, 1));
		}
		if (mode != 'F') close(fd); // F keeps the pool's descriptor open
		CUipcEventHandle eh; if (read(sv[0], &eh, sizeof eh) != sizeof eh) return 4;
		CUevent ev = NULL;
		if (mode == 'E') { CK(cuIpcOpenEventHandle(&ev, eh)); CK(cuStreamWaitEvent(s, ev, 0)); }
		CUdeviceptr b[256];
		for (int i = 0; i < k; i++) { CUmemPoolPtrExportData e; if (read(sv[0], &e, sizeof e) != sizeof e) return 4; CK(cuMemPoolImportPointer(&b[i], pool, &e)); }
		unsigned v; CK(cuMemcpyDtoH(&v, b[k - 1], 4));
		cuuint64_t res = 0; CUresult ra = cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res);
		printf("%c round %d k %d: read %u; %+ld MiB after import (imported pool reserved %llu MiB, rc %d)\n", mode, r, k, v, freemb(f0), (unsigned long long)res >> 20, ra);
		if (mode == 'K') { kill(pid, SIGKILL); waitpid(pid, NULL, 0); }
		for (int i = 0; i < k; i++) { CUresult x = cuMemFreeAsync(b[i], s); if (x) printf("free: %d\n", x); }
		CK(cuStreamSynchronize(s));
		if (ev) CK(cuEventDestroy(ev));
		CUresult rt = cuMemPoolTrimTo(pool, 0);
		CUresult rd = cuMemPoolDestroy(pool);
		if (mode != 'K') { if (write(sv[0], "x", 1) != 1) return 7; waitpid(pid, NULL, 0); }
		close(sv[0]);
		CK(cuCtxSynchronize()); usleep(300000);
		printf("%c round %d: %+ld MiB at the end (trim rc %d, destroy rc %d)\n", mode, r, freemb(f0), rt, rd);
	}
	return 0;
}
