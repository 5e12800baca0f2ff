//go:build ignore

// fakecuda.c is a stand-in for libcuda.so.1 that needs no GPU. It has two modes,
// chosen by $FAKECUDA_MODE at the first call:
//
//   fast (default)  every call succeeds at once, handles and device pointers are fake
//                   increasing numbers, nothing is tracked and no lock is taken on the
//                   hot paths: a benchmark against it measures only the Go side.
//   strict          a functional, checking driver for tests: devices, contexts,
//                   streams run by an executor thread in a pseudo-random interleaving,
//                   events, real memory behind every allocation (never reused), pools,
//                   registered host memory, modules parsed from PTX, launches recorded,
//                   and every misuse counted as a violation (see README.md).
//
// Build it with cudatest.Build (package cuda/cudatest), or by hand:
//
//	gcc -O2 -shared -fPIC -pthread -o libcuda.so.1 fakecuda.c
//
// and point GOCUDA_CUDA_LIB at the result. It must build with plain gcc, without the
// CUDA headers: the few constants it needs are copied from cuda.h (CUDA 13.0) below.
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

// The driver version cuDriverGetVersion reports: cudatest's Driver118 builds
// the fake with 11080, and with only the CUDA 11.8 headers' symbols exported.
#ifndef FAKECUDA_DRIVER_VERSION
#define FAKECUDA_DRIVER_VERSION 13000
#endif

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef uintptr_t H; // any handle, as the ABI passes it

// CUresult values (cuda.h, enum cudaError_enum).
enum {
	OK = 0,
	E_INVALID_VALUE = 1,
	E_OUT_OF_MEMORY = 2,
	E_NOT_INITIALIZED = 3,
	E_NO_DEVICE = 100,
	E_INVALID_DEVICE = 101,
	E_INVALID_CONTEXT = 201,
	E_PEER_ACCESS_UNSUPPORTED = 217,
	E_INVALID_PTX = 218,
	E_INVALID_HANDLE = 400,
	E_ILLEGAL_STATE = 401,
	E_LOSSY_QUERY = 402,
	E_NOT_FOUND = 500,
	E_NOT_READY = 600,
	E_PEER_ACCESS_ALREADY_ENABLED = 704,
	E_PEER_ACCESS_NOT_ENABLED = 705,
	E_ILLEGAL_ADDRESS = 700,
	E_CONTEXT_IS_DESTROYED = 709,
	E_ASSERT = 710,
	E_LAUNCH_FAILED = 719,
	E_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
	E_HOST_MEMORY_ALREADY_REGISTERED = 712,
	E_HOST_MEMORY_NOT_REGISTERED = 713,
	E_NOT_SUPPORTED = 801,
	E_STREAM_CAPTURE_UNSUPPORTED = 900,
	E_STREAM_CAPTURE_INVALIDATED = 901,
	E_GRAPH_EXEC_UPDATE_FAILURE = 910,
};

// Other cuda.h constants.
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_STREAM_LEGACY 0x1       // ((CUstream)0x1)
#define CU_STREAM_PER_THREAD 0x2   // ((CUstream)0x2)
#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_EVENT_INTERPROCESS 0x4
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_HOST 0x2
#define CU_MEM_ATTACH_SINGLE 0x4
#define CU_LAUNCH_PARAM_END 0x0
#define CU_LAUNCH_PARAM_BUFFER_POINTER 0x1
#define CU_LAUNCH_PARAM_BUFFER_SIZE 0x2
#define CU_JIT_INFO_LOG_BUFFER 3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_ALLOCATION_TYPE_MANAGED 0x2
#define CU_MEM_LOCATION_TYPE_NONE 0x0
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_LOCATION_TYPE_HOST 0x2
#define CU_MEM_LOCATION_TYPE_HOST_NUMA 0x3
#define CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 0x4
#define CU_MEM_ACCESS_FLAGS_PROT_NONE 0x0
#define CU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES 1
#define CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES 3
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#define CU_MEMPOOL_ATTR_USED_MEM_HIGH 8
#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CU_FUNC_ATTRIBUTE_NUM_REGS 4
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_FUNC_ATTRIBUTE_MAX 16
#define CU_STREAM_CAPTURE_STATUS_NONE 0
#define CU_STREAM_CAPTURE_STATUS_ACTIVE 1
#define CU_STREAM_CAPTURE_STATUS_INVALIDATED 2
#define CU_DEVICE_ATTRIBUTE_MAX 148
#define CU_STREAM_CAPTURE_MODE_RELAXED 2
#define CU_MEMORYTYPE_HOST 0x01
#define CU_MEMORYTYPE_DEVICE 0x02
#define CU_MEMORYTYPE_ARRAY 0x03
#define CU_MEMORYTYPE_UNIFIED 0x04
#define CU_GRAPH_NODE_TYPE_KERNEL 0
#define CU_GRAPH_NODE_TYPE_MEMCPY 1
#define CU_GRAPH_NODE_TYPE_MEMSET 2
#define CU_GRAPH_NODE_TYPE_HOST 3
#define CU_GRAPH_NODE_TYPE_GRAPH 4
#define CU_GRAPH_NODE_TYPE_EMPTY 5
#define CU_GRAPH_NODE_TYPE_WAIT_EVENT 6
#define CU_GRAPH_NODE_TYPE_EVENT_RECORD 7
#define CU_GRAPH_NODE_TYPE_CONDITIONAL 13
#define CU_GRAPH_COND_TYPE_IF 0
#define CU_GRAPH_COND_TYPE_WHILE 1
#define CU_GRAPH_COND_TYPE_SWITCH 2
#define CU_GRAPH_COND_ASSIGN_DEFAULT 1
#define CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC 1
#define CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER 2

// CUmemLocation, CUmemPoolProps and CUmemAccessDesc, with cuda.h's layout.
typedef struct { int type, id; } CUmemLocation;
typedef struct {
	int allocType, handleTypes;
	CUmemLocation location;
	void *win32SecurityAttributes;
	size_t maxSize;
	unsigned short usage;
	unsigned char reserved[54];
} CUmemPoolProps;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps layout");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

// The graph-building structs, with cuda.h's names, field names and layout (CUDA 13.0;
// handles are H). The asserts hold the header's offsets; fakecuda_layout reports them
// so that TestLayout compares them with cuda.h itself.
typedef struct {
	CUdeviceptr dst;
	size_t pitch;
	unsigned value, elementSize;
	size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;
// CUDA_HOST_NODE_PARAMS: cuGraphAddHostNode's function and its user data.
typedef struct { void (*fn)(void *); void *userData; } CUDA_HOST_NODE_PARAMS;
_Static_assert(sizeof(CUDA_MEMSET_NODE_PARAMS) == 40 && offsetof(CUDA_MEMSET_NODE_PARAMS, value) == 16 &&
	offsetof(CUDA_MEMSET_NODE_PARAMS, elementSize) == 20 && offsetof(CUDA_MEMSET_NODE_PARAMS, width) == 24 &&
	offsetof(CUDA_MEMSET_NODE_PARAMS, height) == 32, "CUDA_MEMSET_NODE_PARAMS layout");

typedef struct {
	size_t srcXInBytes, srcY, srcZ, srcLOD;
	int srcMemoryType; // CUmemorytype
	const void *srcHost;
	CUdeviceptr srcDevice;
	H srcArray;
	void *reserved0;
	size_t srcPitch, srcHeight;
	size_t dstXInBytes, dstY, dstZ, dstLOD;
	int dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	H dstArray;
	void *reserved1;
	size_t dstPitch, dstHeight;
	size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
_Static_assert(sizeof(CUDA_MEMCPY3D) == 200 && offsetof(CUDA_MEMCPY3D, srcMemoryType) == 32 &&
	offsetof(CUDA_MEMCPY3D, srcHost) == 40 && offsetof(CUDA_MEMCPY3D, srcDevice) == 48 &&
	offsetof(CUDA_MEMCPY3D, reserved0) == 64 && offsetof(CUDA_MEMCPY3D, srcPitch) == 72 &&
	offsetof(CUDA_MEMCPY3D, srcHeight) == 80 && offsetof(CUDA_MEMCPY3D, dstXInBytes) == 88 &&
	offsetof(CUDA_MEMCPY3D, dstMemoryType) == 120 && offsetof(CUDA_MEMCPY3D, dstHost) == 128 &&
	offsetof(CUDA_MEMCPY3D, dstDevice) == 136 && offsetof(CUDA_MEMCPY3D, reserved1) == 152 &&
	offsetof(CUDA_MEMCPY3D, dstPitch) == 160 && offsetof(CUDA_MEMCPY3D, dstHeight) == 168 &&
	offsetof(CUDA_MEMCPY3D, WidthInBytes) == 176 && offsetof(CUDA_MEMCPY3D, Height) == 184 &&
	offsetof(CUDA_MEMCPY3D, Depth) == 192, "CUDA_MEMCPY3D layout");

// CUDA_KERNEL_NODE_PARAMS is CUDA_KERNEL_NODE_PARAMS_v2 in CUDA 13.0; _v1, without
// kern and ctx, is what the entry points without the _v2 suffix take.
typedef struct {
	H func;
	unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
	void **kernelParams, **extra;
	H kern, ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct {
	H func;
	unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
	void **kernelParams, **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == 72 && offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) == 8 &&
	offsetof(CUDA_KERNEL_NODE_PARAMS, blockDimX) == 20 && offsetof(CUDA_KERNEL_NODE_PARAMS, sharedMemBytes) == 32 &&
	offsetof(CUDA_KERNEL_NODE_PARAMS, kernelParams) == 40 && offsetof(CUDA_KERNEL_NODE_PARAMS, extra) == 48 &&
	offsetof(CUDA_KERNEL_NODE_PARAMS, kern) == 56 && offsetof(CUDA_KERNEL_NODE_PARAMS, ctx) == 64,
	"CUDA_KERNEL_NODE_PARAMS layout");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56 && offsetof(CUDA_KERNEL_NODE_PARAMS_v1, extra) == 48,
	"CUDA_KERNEL_NODE_PARAMS_v1 layout");

typedef struct {
	unsigned char from_port, to_port, type;
	unsigned char reserved[5];
} CUgraphEdgeData;
_Static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData layout");

// CUDA_CONDITIONAL_NODE_PARAMS, and CUgraphNodeParams (cuGraphAddNode_v2) with the one
// member of its union the fake implements.
typedef struct {
	uint64_t handle; // CUgraphConditionalHandle
	int type;        // CUgraphConditionalNodeType
	unsigned size;
	H *phGraph_out;
	H ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;
typedef struct {
	int type; // CUgraphNodeType
	int reserved0[3];
	union {
		long long reserved1[29];
		CUDA_CONDITIONAL_NODE_PARAMS conditional;
	};
	long long reserved2;
} CUgraphNodeParams;
_Static_assert(sizeof(CUDA_CONDITIONAL_NODE_PARAMS) == 32 && offsetof(CUDA_CONDITIONAL_NODE_PARAMS, size) == 12 &&
	offsetof(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out) == 16 && offsetof(CUDA_CONDITIONAL_NODE_PARAMS, ctx) == 24,
	"CUDA_CONDITIONAL_NODE_PARAMS layout");
_Static_assert(sizeof(CUgraphNodeParams) == 256 && offsetof(CUgraphNodeParams, conditional) == 16 &&
	offsetof(CUgraphNodeParams, reserved2) == 248, "CUgraphNodeParams layout");

// CUgraphExecUpdateResult values, and CUgraphExecUpdateResultInfo (cuGraphExecUpdate_v2).
enum { UPD_SUCCESS = 0, UPD_TOPOLOGY_CHANGED = 2, UPD_NODE_TYPE_CHANGED = 3, UPD_FUNCTION_CHANGED = 4 };
typedef struct {
	int result; // CUgraphExecUpdateResult
	H errorNode, errorFromNode;
} CUgraphExecUpdateResultInfo;
_Static_assert(sizeof(CUgraphExecUpdateResultInfo) == 24 && offsetof(CUgraphExecUpdateResultInfo, errorNode) == 8,
	"CUgraphExecUpdateResultInfo layout");

#define MAXDEV 64
#define KiB 1024ull
#define GiB (1024ull * 1024 * 1024)

/* ================================================================================
 * Configuration and mode
 * ================================================================================ */

enum { MODE_FAST = 1, MODE_STRICT = 2 };
static int g_mode; // 0 until cfg_init ran
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static int ndev = 1;
// no_peer: bit d set when device d has no peer access to any other (control "peer").
static uint64_t no_peer;
static uint64_t capacity[MAXDEV];
static uint64_t seed = 0x5eed;
static int abort_on, verbose;
static int64_t spin_ns = 20000; // how long the idle executor polls before it sleeps

static uint64_t env_u64(const char *name, uint64_t def) {
	const char *e = getenv(name);
	if (e == NULL || *e == 0) return def;
	char *end;
	unsigned long long v = strtoull(e, &end, 0);
	switch (*end) { // a size suffix, for FAKECUDA_MEMORY_BYTES=16G
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case 't': case 'T': v <<= 40; break;
	}
	return v;
}

static void strict_init(void);

static void cfg_init(void) {
	const char *m = getenv("FAKECUDA_MODE");
	int mode = MODE_FAST;
	if (m && strcmp(m, "strict") == 0) mode = MODE_STRICT;
	else if (m && *m && strcmp(m, "fast") != 0)
		fprintf(stderr, "fakecuda: unknown FAKECUDA_MODE \"%s\", using fast\n", m);
	uint64_t nd = env_u64("FAKECUDA_DEVICES", 1);
	ndev = nd > MAXDEV ? MAXDEV : (int)nd;
	// Fast mode reports what the benchmarks always saw (an H200's 141 GiB).
	uint64_t cap = env_u64("FAKECUDA_MEMORY_BYTES", mode == MODE_STRICT ? 8 * GiB : 141 * GiB);
	for (int i = 0; i < MAXDEV; i++) capacity[i] = cap;
	seed = env_u64("FAKECUDA_SEED", seed);
	abort_on = env_u64("FAKECUDA_ABORT", 0) != 0;
	verbose = env_u64("FAKECUDA_VERBOSE", 0) != 0;
	spin_ns = (int64_t)env_u64("FAKECUDA_SPIN_US", 20) * 1000;
	if (mode == MODE_STRICT) strict_init();
	__atomic_store_n(&g_mode, mode, __ATOMIC_RELEASE);
}

static inline int strict(void) {
	int m = __atomic_load_n(&g_mode, __ATOMIC_ACQUIRE);
	if (__builtin_expect(m == 0, 0)) {
		pthread_once(&cfg_once, cfg_init);
		m = __atomic_load_n(&g_mode, __ATOMIC_ACQUIRE);
	}
	return m == MODE_STRICT;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* ================================================================================
 * Error names and strings (cuGetErrorName, cuGetErrorString)
 * ================================================================================ */

static const struct { int code; const char *name, *str; } errtab[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool"},
	{6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized: call cudaProfilerInitialize()"},
	{7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started"},
	{8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped"},
	{34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	{36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "API call requires a newer CUDA driver"},
	{46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license"},
	{200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
	{205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
	{206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed"},
	{207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped"},
	{208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
	{209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	{210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired"},
	{211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
	{212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array"},
	{213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer"},
	{214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
	{215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture"},
	{216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "exclusive-thread device already in use by a different thread"},
	{217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	{218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context"},
	{220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution"},
	{221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
	{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
	{223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled"},
	{224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the provided execution affinity is not supported"},
	{225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
	{226, "CUDA_ERROR_CONTAINED", "Invalid access of peer GPU memory over nvlink or a hardware error"},
	{300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
	{301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
	{302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
	{303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed"},
	{304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	{402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be semantically lossy"},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{600, "CUDA_ERROR_NOT_READY", "device not ready"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	{702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
	{703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode"},
	{704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	{708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
	{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
	{711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
	{712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	{714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
	{715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
	{716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	{717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space"},
	{718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
	{719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
	{721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed"},
	{800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
	{803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
	{804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
	{805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "MPS client failed to connect to the MPS control daemon or the MPS server"},
	{806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed"},
	{807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "MPS server is not ready to accept new MPS client requests"},
	{808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the hardware resources required to create MPS client have been exhausted"},
	{809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "the hardware resources required to support device connections have been exhausted"},
	{810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server"},
	{811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"},
	{812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "unsupported interaction between different versions of CUDA Dynamic Parallelism"},
	{900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	{901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	{902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
	{903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
	{904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
	{905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
	{906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
	{907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
	{908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
	{909, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
	{910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
	{911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occurred in an external entity outside of CUDA"},
	{912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration"},
	{913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "the function handle is not loaded when calling an API that requires a loaded function"},
	{914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "one or more resources passed in are not valid resource types for the operation"},
	{915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "one or more resources are insufficient or non-applicable for the operation"},
	{916, "CUDA_ERROR_KEY_ROTATION", "an error happened during the key rotation sequence"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int errindex(CUresult r) {
	for (size_t i = 0; i < sizeof errtab / sizeof errtab[0]; i++)
		if (errtab[i].code == r) return (int)i;
	return -1;
}

// Unknown codes: CUDA_ERROR_INVALID_VALUE and *s = NULL, as the driver answers.
EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
	if (s == NULL) return E_INVALID_VALUE;
	int i = errindex(r);
	*s = i < 0 ? NULL : errtab[i].name;
	return i < 0 ? E_INVALID_VALUE : OK;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
	if (s == NULL) return E_INVALID_VALUE;
	int i = errindex(r);
	*s = i < 0 ? NULL : errtab[i].str;
	return i < 0 ? E_INVALID_VALUE : OK;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
	if (v == NULL) return E_INVALID_VALUE;
	*v = FAKECUDA_DRIVER_VERSION;
	return OK;
}

/* ================================================================================
 * Fast mode: fake numbers, nothing tracked
 * ================================================================================ */

static uintptr_t fast_next_handle = 0x1000;
static uint64_t fast_next_ptr = 0x7f0000000000ull;
static const H fast_primary = 0xc0c0;
static __thread H fast_current;

static H fast_handle(void) { return __atomic_add_fetch(&fast_next_handle, 16, __ATOMIC_RELAXED); }

static uint64_t fast_ptr(size_t n) {
	uint64_t sz = ((uint64_t)n + 255) & ~(uint64_t)255;
	if (sz == 0) sz = 256;
	return __atomic_fetch_add(&fast_next_ptr, sz, __ATOMIC_RELAXED);
}

/* ================================================================================
 * PTX parsing (both modes): kernel parameter layouts and global variables
 * ================================================================================ */

typedef struct {
	size_t n, argsize;
	size_t *off, *size;
} layout;

static int ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$'; }

// ptx_type_size returns the size in bytes of a PTX type token such as ".u32", 0 if
// the token is not a type.
static size_t ptx_type_size(const char *t, size_t len) {
	static const struct { const char *name; size_t size; } types[] = {
		{".u8", 1}, {".s8", 1}, {".b8", 1}, {".pred", 1},
		{".u16", 2}, {".s16", 2}, {".b16", 2}, {".f16", 2}, {".bf16", 2},
		{".u32", 4}, {".s32", 4}, {".b32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4},
		{".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8}, {".b128", 16},
	};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strlen(types[i].name) == len && strncmp(t, types[i].name, len) == 0) return types[i].size;
	return 0;
}

// decl_size parses one declaration's tokens in [p, end): its type, alignment and
// array dimensions. name (may be NULL) receives the identifier, up to namecap bytes;
// elem_out (may be NULL) the element's size, negative for a floating-point type.
static void decl_size(const char *p, const char *end, size_t *size, size_t *align, char *name, size_t namecap, int *elem_out) {
	size_t elem = 0, count = 1, al = 0;
	int isfloat = 0;
	int after_ptr = 0;
	if (name && namecap) name[0] = 0;
	while (p < end) {
		while (p < end && (isspace((unsigned char)*p) || *p == ',')) p++;
		const char *t = p;
		while (p < end && !isspace((unsigned char)*p) && *p != ',') p++;
		size_t len = (size_t)(p - t);
		if (len == 0) break;
		if (len == 4 && strncmp(t, ".ptr", 4) == 0) {
			after_ptr = 1; // a later .align is the pointee's, not the parameter's
		} else if (len == 6 && strncmp(t, ".align", 6) == 0) {
			while (p < end && isspace((unsigned char)*p)) p++;
			size_t a = (size_t)strtoul(p, NULL, 10);
			while (p < end && isdigit((unsigned char)*p)) p++;
			if (!after_ptr) al = a;
		} else if (t[0] == '.') {
			size_t s = ptx_type_size(t, len);
			if (s && !elem) {
				elem = s;
				isfloat = t[1] == 'f' && (len == 4); // .f32, .f64 (not .f16x2)
			}
		} else if (t[0] == '[') {
			count *= (size_t)strtoul(t + 1, NULL, 10);
		} else {
			const char *br = memchr(t, '[', len);
			size_t nl = br ? (size_t)(br - t) : len;
			if (name && namecap && !name[0]) {
				if (nl >= namecap) nl = namecap - 1;
				memcpy(name, t, nl);
				name[nl] = 0;
			}
			for (const char *b = br; b && b < p; b = memchr(b + 1, '[', (size_t)(p - b - 1)))
				count *= (size_t)strtoul(b + 1, NULL, 10);
		}
	}
	*size = elem * count;
	*align = al ? al : (elem ? elem : 1);
	if (elem_out) *elem_out = isfloat ? -(int)elem : (int)elem;
}

// find_entry returns the text after ".entry name" in ptx, or NULL.
static const char *find_entry(const char *ptx, const char *name) {
	size_t nl = strlen(name);
	for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 6, ".entry")) {
		const char *q = p + 6;
		if (!isspace((unsigned char)*q)) continue;
		while (isspace((unsigned char)*q)) q++;
		if (strncmp(q, name, nl) == 0 && !ident_char(q[nl])) return q + nl;
	}
	return NULL;
}

// parse_params fills l with the parameters of the .entry whose name ends at p.
static void parse_params(const char *p, layout *l) {
	memset(l, 0, sizeof *l);
	while (isspace((unsigned char)*p)) p++;
	if (*p != '(') return;
	const char *end = strchr(p, ')');
	if (end == NULL) return;
	size_t cap = 0, off = 0;
	for (const char *q = p + 1; q < end;) {
		const char *c = memchr(q, ',', (size_t)(end - q));
		if (c == NULL) c = end;
		const char *prm = strstr(q, ".param");
		if (prm && prm < c) {
			size_t size, align;
			decl_size(prm + 6, c, &size, &align, NULL, 0, NULL);
			if (l->n == cap) {
				cap = cap ? cap * 2 : 8;
				l->off = realloc(l->off, cap * sizeof *l->off);
				l->size = realloc(l->size, cap * sizeof *l->size);
			}
			off = (off + align - 1) / align * align;
			l->off[l->n] = off;
			l->size[l->n] = size;
			l->n++;
			off += size;
		}
		q = c + 1;
	}
	l->argsize = l->n ? l->off[l->n - 1] + l->size[l->n - 1] : 0;
}

// find_global returns the size of the module-scope .global or .const variable name
// declared in ptx (0 if it is scalar-less), or -1 if there is none. *elem receives
// its element size (negative: floating point), *init its initializer (after the
// '='), or NULL.
static int64_t find_global(const char *ptx, const char *name, int *elem, const char **init) {
	static const char *spaces[] = {".global", ".const"};
	for (int k = 0; k < 2; k++) {
		size_t kl = strlen(spaces[k]);
		for (const char *p = strstr(ptx, spaces[k]); p; p = strstr(p + kl, spaces[k])) {
			if (p != ptx && !isspace((unsigned char)p[-1])) continue; // ld.global, .ptr.global
			if (!isspace((unsigned char)p[kl])) continue;
			const char *end = strpbrk(p, ";={(),");
			if (end == NULL || (*end != ';' && *end != '=')) continue; // not a variable declaration
			char got[256];
			size_t size, align;
			decl_size(p + kl, end, &size, &align, got, sizeof got, elem);
			if (strcmp(got, name) == 0) {
				*init = *end == '=' ? end + 1 : NULL;
				return (int64_t)size;
			}
		}
	}
	return -1;
}

// init_global writes a PTX initializer (a value, or values in braces) into the
// variable's n bytes: integers, floating-point literals, and 0f/0d bit patterns.
static void init_global(char *dst, size_t n, int elem, const char *init) {
	int isfloat = elem < 0;
	size_t es = (size_t)(elem < 0 ? -elem : elem), off = 0;
	if (es == 0 || es > 8) return;
	for (const char *p = init; *p && *p != ';' && off + es <= n;) {
		if (isspace((unsigned char)*p) || *p == '{' || *p == '}' || *p == ',') {
			p++;
			continue;
		}
		char *q;
		uint64_t bits;
		if (p[0] == '0' && (p[1] == 'f' || p[1] == 'F' || p[1] == 'd' || p[1] == 'D') && isxdigit((unsigned char)p[2])) {
			bits = strtoull(p + 2, &q, 16);
		} else if (isfloat) {
			double d = strtod(p, &q);
			if (es == 4) {
				float f = (float)d;
				uint32_t u;
				memcpy(&u, &f, 4);
				bits = u;
			} else {
				memcpy(&bits, &d, 8);
			}
		} else {
			bits = (uint64_t)strtoll(p, &q, 0);
		}
		if (q == p) return; // not a number: leave the rest zero
		memcpy(dst + off, &bits, es); // little-endian: the low bytes
		off += es;
		p = q;
	}
}

enum { IMG_PTX, IMG_ELF, IMG_FATBIN };

static uint16_t rd16(const unsigned char *b) { uint16_t v; memcpy(&v, b, 2); return v; }
static uint32_t rd32(const unsigned char *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static uint64_t rd64(const unsigned char *b) { uint64_t v; memcpy(&v, b, 8); return v; }

// image_kind classifies a module image and returns its length in bytes: ELF and
// fatbin images carry their size in their headers, PTX ends at its NUL.
static int image_kind(const void *img, size_t *len) {
	const unsigned char *b = img;
	if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
		size_t n = 64;
		if (b[4] == 2) { // ELFCLASS64: the furthest of the header tables and sections
			uint64_t phoff = rd64(b + 0x20), shoff = rd64(b + 0x28);
			uint16_t phes = rd16(b + 0x36), phn = rd16(b + 0x38), shes = rd16(b + 0x3a), shn = rd16(b + 0x3c);
			uint64_t m = 64;
			if (phoff + (uint64_t)phes * phn > m) m = phoff + (uint64_t)phes * phn;
			if (shoff + (uint64_t)shes * shn > m) m = shoff + (uint64_t)shes * shn;
			if (m < (1ull << 30) && shes >= 0x28) {
				for (uint16_t i = 0; i < shn; i++) {
					const unsigned char *sh = b + shoff + (uint64_t)i * shes;
					if (rd32(sh + 4) == 8) continue; // SHT_NOBITS
					uint64_t e = rd64(sh + 0x18) + rd64(sh + 0x20);
					if (e > m && e < (1ull << 30)) m = e;
				}
			}
			if (m < (1ull << 30)) n = (size_t)m;
		}
		*len = n;
		return IMG_ELF;
	}
	if (rd32(b) == 0xBA55ED50u) { // fatbin: headerSize (u16 at 6) + fatSize (u64 at 8)
		uint64_t n = (uint64_t)rd16(b + 6) + rd64(b + 8);
		*len = n < (1ull << 30) ? (size_t)n : 16;
		return IMG_FATBIN;
	}
	*len = strlen((const char *)img) + 1;
	return IMG_PTX;
}

/* ================================================================================
 * Strict mode: state
 * ================================================================================ */

// Handle types.
enum { H_CTX = 1, H_STREAM, H_EVENT, H_MODULE, H_FUNC, H_POOL, H_GRAPH, H_EXEC, H_NODE, H_N };
static const char *const hname[H_N] = {"?", "context", "stream", "event", "module", "function", "memory pool", "graph", "graph exec",
	"graph node"};

typedef struct ctx_s ctx_t;

// Every handle points at a slot of the arena that starts with hdr. Slots are never
// freed or reused: a destroyed object stays as a tombstone (dead = 1), so a stale
// handle is recognised for what it is.
typedef struct {
	uint32_t magic;
	uint8_t type;
	uint8_t dead;
	uint8_t pad[2];
	uint64_t id;
	ctx_t *ctx;  // the context current at creation (NULL for device-owned objects)
	void *cnext; // the next object of the same context (its destruction walks them)
} hdr;

#define MAGIC 0xFA4ECDA1u
#define SLOT 128 // every record fits; destroyed ones stay resident, so small matters

struct ctx_s {
	hdr h;
	int dev;
	unsigned flags;
	int primary;
	int64_t pending;  // queued or running operations on the context's streams
	int64_t bpending; // the same, on its blocking streams (those the legacy stream waits for)
	hdr *objs;        // objects created in the context, newest first
	struct mem_s *mems;
	struct reg_s *regs;
	struct ctx_s **peers; // cuCtxEnablePeerAccess: the contexts whose memory this one's kernels may use
	int npeers, cappeers;
	// sticky is the error a faulting kernel left (fault_kernel_code): every later
	// call with the context current returns it, as the real driver's sticky errors
	// do (fault_exempt lists the calls that still work).
	CUresult sticky;
};

typedef struct op_s op_t;
typedef struct graph_s graph_t;
typedef struct capinfo_s capinfo_t;

typedef struct {
	hdr h;
	unsigned flags;
	int prio;
	op_t *head, *tail; // the FIFO of operations; head may be running
	uint64_t enq, done; // operations queued and finished so far
	int64_t active;     // index in the executor's active list, -1 when empty
	graph_t *capture;   // the graph being captured, or NULL
	int capture_invalid;
	capinfo_t *cap;     // the capture's state, while capture is set
} stream_t;

typedef struct {
	hdr h;
	unsigned flags;
	uint64_t enq;      // records queued so far (the latest record's number)
	uint64_t done;     // every record up to this number has run
	uint64_t *ooo;     // records past done that ran out of order
	size_t nooo, capooo;
	uint64_t ts_seq, ts; // the latest record that ran, and when
	void *ipc_src;       // cuIpcOpenEventHandle: the exporter's event, which waits and queries see
} event_t;

typedef struct func_s func_t;
typedef struct gvar_s gvar_t;

typedef struct {
	hdr h;
	int kind; // IMG_*
	char *image;
	size_t len;
	func_t *funcs;
	gvar_t *globals;
} module_t;

struct func_s {
	hdr h;
	module_t *mod;
	char *name;
	layout l;
	int max_dyn_smem;
	func_t *next;
};

typedef struct {
	hdr h;
	int dev;
	int kind; // MK_DEVICE, MK_HOST or MK_MANAGED
	int is_default;
	uint64_t threshold;
	int reuse[4];
	uint64_t used, used_high, reserved_high;
	uint64_t readable, writable; // access of device d: bit d
	uint8_t host_access;
	uint8_t ipc_fd; // made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: its memory is shared mappings
	void *src;      // an imported pool: the exporter's pool
} pool_t;

// A graph, or a graph exec: a list of operations, run in order (a valid
// serialization of any graph whose dependencies all point backwards in the list, as
// those of nodes added one by one do).
struct graph_s {
	hdr h;
	op_t *head, *tail;
	int64_t n;
	graph_t *origin;     // an exec: the graph it was instantiated from
	stream_t *capturing; // a graph: the stream capturing into it, or NULL
	graph_t *parent;     // the body of a conditional node: the graph that has the node
};

// A graph node. Explicitly added nodes have one from the start; a captured operation
// gets one when it is asked for (cuGraphGetNodes, cuStreamGetCaptureInfo). The node's
// operations (several for a child graph, one placeholder for an empty node) follow one
// another in the graph's list and carry its nid, which their copies in execs keep.
typedef struct node_s {
	hdr h;
	graph_t *g;
	int type;     // CU_GRAPH_NODE_TYPE_*
	uint64_t nid;
} node_t;

// The state of a stream capture.
struct capinfo_s {
	uint64_t id;   // unique over the process
	int to_graph;  // cuStreamBeginCaptureToGraph: the graph is the caller's
	op_t *mark;    // the graph's last operation when the capture began (NULL: none)
	size_t ndeps;  // the dependencies the capture began with, and their edge data
	H *deps;
	CUgraphEdgeData *edges;
	H last;        // cuStreamGetCaptureInfo's array of one node
	CUgraphEdgeData last_edge;
};

_Static_assert(sizeof(ctx_t) <= SLOT && sizeof(stream_t) <= SLOT && sizeof(event_t) <= SLOT &&
	sizeof(module_t) <= SLOT && sizeof(func_t) <= SLOT && sizeof(pool_t) <= SLOT && sizeof(graph_t) <= SLOT &&
	sizeof(node_t) <= SLOT, "handle slot too small");

// Memory ranges: allocations and host registrations share a first member, so that an
// operation can keep a pointer to either and check its state when it runs.
enum { ST_LIVE, ST_FREE_PENDING, ST_FREED, ST_UNREG };
static const char *const stname[] = {"live", "free pending", "freed", "unregistered"};

typedef struct {
	int state;
	int is_reg;
} rng_t;

enum { MK_DEVICE, MK_HOST, MK_MANAGED, MK_GLOBAL, MK_N };
static const char *const mkname[MK_N] = {"device", "pinned host", "managed", "module global"};
enum { API_ALLOC, API_HOST, API_GLOBAL }; // how it must be freed: cuMemFree(Async), cuMemFreeHost, never

typedef struct mem_s {
	rng_t r;
	int kind, api, dev;
	ctx_t *ctx;
	pool_t *pool;
	uintptr_t base;
	size_t size, mapped; // requested, and made accessible (whole pages)
	struct mem_s *cnext; // the context's allocations
	struct mem_s *src;   // cuMemPoolImportPointer: the exporter's allocation (the same pages)
	int imports;         // an exported allocation: its live imports
	int shared;          // its pages are a shared mapping (a pool with ipc_fd, or an import)
} mem_t;

typedef struct reg_s {
	rng_t r;
	int by_api; // ended by cuMemHostUnregister (not by its context's destruction)
	ctx_t *ctx;
	uintptr_t base;
	size_t size;
	unsigned flags;
	struct reg_s *cnext; // the context's registrations
} reg_t;

struct gvar_s {
	char *name;
	mem_t *m;
	gvar_t *next;
};

// Operations queued on streams.
// OP_EMPTY stands for an empty node (or an empty child graph) in a graph; launching
// the graph queues nothing for it.
// OP_COND is a conditional node: in a graph, its body graphs; in an exec (or a child
// graph's copy), copies of their operations.
enum { OP_KERNEL, OP_COPY, OP_MEMSET, OP_RECORD, OP_WAIT, OP_FREE, OP_HOSTFN, OP_DELAY, OP_EMPTY, OP_COND };

struct op_s {
	op_t *next;
	int type;
	const char *fn; // the API call that queued it, for violations
	stream_t *s;
	union {
		struct { func_t *f; uint64_t ns; uint32_t grid[3], block[3], shm; uint8_t *params; size_t psize; } k;
		// A copy of height x depth rows of n bytes (0 is 1), pitches apart, slices
		// sheight or dheight rows apart (graph copy nodes; one row otherwise).
		struct { char *dst; const char *src; size_t n; char *staging; size_t height, depth, spitch, dpitch, sheight, dheight; } cp;
		// A memset of rows (0 is 1) of count elements, pitch bytes apart.
		struct { char *dst; uint32_t val; size_t count; int elem; size_t pitch, rows; } ms;
		struct { event_t *e; uint64_t seq; } ev;
		struct { mem_t *m; } fr;
		struct { void (*fn)(void *); void *arg; } hf;
		struct { uint64_t ns; } dl;
		struct { H *bodies; op_t **lists; unsigned size; int type; uint64_t cond; } cd;
	} u;
	size_t nrefs, caprefs;
	rng_t **refs; // memory the operation touches, checked when it runs
	rng_t *inl[3];
	uint64_t nid;         // in a graph or exec: the number of its node (copies keep it)
	struct node_s *node;  // in a graph: its node, once it has one
	uint8_t pbuf[64]; // a kernel's parameters, when they fit
};

// The one lock of strict mode, and its conditions: cv_work wakes the executor,
// cv_done wakes callers waiting for work to finish.
static pthread_mutex_t G = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP; // spins briefly before sleeping
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER, cv_done = PTHREAD_COND_INITIALIZER;
static int initialized;

static char *arena;
static size_t arena_slots, arena_used;

static ctx_t *prim[MAXDEV];
static int prim_refs[MAXDEV];
static unsigned prim_flags[MAXDEV];
static pool_t *def_pool[MAXDEV], *cur_pool[MAXDEV];
static uint64_t dev_used[MAXDEV];

static uintptr_t va_base, va_next, va_end;
static size_t page = 4096;
static mem_t **mems;
static size_t nmems, capmems;
static reg_t **regs; // sorted by base, never overlapping: live ones and tombstones
static size_t nregs, capregs;

static int64_t live_h[H_N], dead_h[H_N];
static int64_t mem_live_n[MK_N], mem_live_b[MK_N];
static int64_t allocs_total, frees_total, free_pending_n, ops_executed, ops_pending, regs_live, regs_ended;

// Injections.
enum { DK_STREAM, DK_EVENT, DK_MODULE, DK_CONTEXT, DK_POOL, DK_MEMFREE, DK_HOSTUNREG, DK_N };
enum { AK_DEVICE = 1, AK_POOL = 2, AK_HOST = 4, AK_MANAGED = 8 };
static int64_t oom_skip, oom_fail;
static unsigned oom_kinds = 15;
static int fail_code[DK_N];
static int64_t slow_ns[DK_N];
static uint64_t kernel_ns;

// The executor.
static pthread_once_t exec_once = PTHREAD_ONCE_INIT;
static stream_t **active;
static size_t nactive, capactive;
static int exec_sleeping, done_waiters, paused;
static uint64_t work_gen;
static uint64_t rng;

// Per-thread context stack.
#define CTX_STACK 64
static __thread ctx_t *tl_stack[CTX_STACK];
static __thread int tl_depth;

static inline ctx_t *cur_ctx(void) { return tl_depth ? tl_stack[tl_depth - 1] : NULL; }

/* ---------- violations ---------- */

#define VMAX 256
#define VLEN 320
static pthread_mutex_t vmu = PTHREAD_MUTEX_INITIALIZER;
static char vmsgs[VMAX][VLEN];
static int64_t vcount;

__attribute__((format(printf, 2, 3))) static void violation(const char *fn, const char *fmt, ...) {
	char line[VLEN];
	int n = snprintf(line, sizeof line, "%s: ", fn);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&vmu);
	int64_t i = vcount++;
	if (i < VMAX) memcpy(vmsgs[i], line, sizeof line);
	pthread_mutex_unlock(&vmu);
	int ab = __atomic_load_n(&abort_on, __ATOMIC_RELAXED);
	if (ab || __atomic_load_n(&verbose, __ATOMIC_RELAXED)) fprintf(stderr, "fakecuda: violation: %s\n", line);
	if (ab) abort();
}

/* ---------- launch records ---------- */

#define RING 4096
#define REC_PARAMS 4096
// fakecuda_launch is one recorded launch, as fakecuda_launch_get copies it out. It
// holds no pointers, so that Go can receive it in its own memory.
typedef struct {
	int64_t seq;
	uint32_t grid[3], block[3];
	uint32_t shared_mem;
	uint32_t param_size; // the full size; params holds the first REC_PARAMS bytes
	uint64_t stream, context;
	char func[128];
	uint8_t params[REC_PARAMS];
	uint32_t cluster[3];       // cuLaunchKernelEx's cluster dimensions (0: none)
	int32_t priority;          // its priority attribute (0: none)
	uint8_t cooperative, programmatic, pad[6];
} fakecuda_launch;
static fakecuda_launch *ring;
static int64_t launch_seq;

/* ---------- init ---------- */

static void strict_init(void) {
	long ps = sysconf(_SC_PAGESIZE);
	if (ps > 0) page = (size_t)ps;
	arena_slots = (size_t)1 << 24; // 16M handles: 2 GiB of address space, touched as used
	arena = mmap(NULL, arena_slots * SLOT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (arena == MAP_FAILED) {
		fprintf(stderr, "fakecuda: cannot reserve the handle arena: %s\n", strerror(errno));
		abort();
	}
	// Every allocation comes from one reserved range, never reused, so that a
	// stale address always finds its (freed) allocation.
	uint64_t va = env_u64("FAKECUDA_VA_BYTES", 16ull << 40);
	void *p = MAP_FAILED;
	for (; va >= GiB; va /= 2) {
		p = mmap(NULL, va, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) break;
	}
	if (p == MAP_FAILED) {
		fprintf(stderr, "fakecuda: cannot reserve address space for memory: %s\n", strerror(errno));
		abort();
	}
	va_base = va_next = (uintptr_t)p;
	va_end = va_base + va;
	for (int i = 0; i < MAXDEV; i++) prim_flags[i] = 0;
	rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

/* ---------- handles ---------- */

static void *h_new(int type, ctx_t *c) {
	if (arena_used == arena_slots) return NULL;
	hdr *h = (hdr *)(arena + arena_used * SLOT);
	memset(h, 0, SLOT);
	h->type = (uint8_t)type;
	h->id = arena_used + 1;
	h->ctx = c;
	if (c) {
		h->cnext = c->objs;
		c->objs = h;
	}
	__atomic_store_n(&h->magic, MAGIC, __ATOMIC_RELEASE);
	__atomic_store_n(&arena_used, arena_used + 1, __ATOMIC_RELEASE);
	live_h[type]++;
	return h;
}

// h_at returns the object at v, or NULL if v is not a handle this fake issued. It
// needs no lock: slots are published with release stores and never change type.
static hdr *h_at(uintptr_t v) {
	uintptr_t a = (uintptr_t)arena;
	if (a == 0 || v < a || v >= a + __atomic_load_n(&arena_used, __ATOMIC_ACQUIRE) * SLOT || (v - a) % SLOT) return NULL;
	hdr *h = (hdr *)v;
	return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == MAGIC ? h : NULL;
}

static void h_kill(hdr *h) {
	if (h->dead) return;
	__atomic_store_n(&h->dead, 1, __ATOMIC_RELEASE);
	live_h[h->type]--;
	dead_h[h->type]++;
}

// get_h validates a handle of the given type: an unknown value, a handle of another
// type or a destroyed one is a violation (contexts answer as the driver does for
// them).
static CUresult get_h(const char *fn, uintptr_t v, int type, void **out) {
	hdr *h = h_at(v);
	*out = NULL;
	if (h == NULL) {
		violation(fn, "invalid %s handle %#lx (not a handle)", hname[type], (unsigned long)v);
		return type == H_CTX ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
	}
	if (h->type != type) {
		violation(fn, "invalid %s handle %#lx (it is a %s)", hname[type], (unsigned long)v, hname[h->type]);
		return type == H_CTX ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
	}
	if (__atomic_load_n(&h->dead, __ATOMIC_ACQUIRE)) {
		violation(fn, "use of destroyed %s %#lx", hname[type], (unsigned long)v);
		return type == H_CTX ? E_CONTEXT_IS_DESTROYED : E_INVALID_HANDLE;
	}
	*out = h;
	return OK;
}

// need_ctx returns the calling thread's current context, which must be live.
static CUresult need_ctx(const char *fn, ctx_t **out) {
	ctx_t *c = cur_ctx();
	*out = c;
	if (c == NULL) return E_INVALID_CONTEXT;
	if (__atomic_load_n(&c->h.dead, __ATOMIC_ACQUIRE)) {
		violation(fn, "call with a destroyed context %#lx current", (unsigned long)(uintptr_t)c);
		return E_CONTEXT_IS_DESTROYED;
	}
	return OK;
}

#define LEGACY ((stream_t *)0)
// get_stream validates a stream handle; 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
// give *out = LEGACY (NULL).
static CUresult get_stream(const char *fn, H v, stream_t **out) {
	if (v == 0 || v == CU_STREAM_LEGACY || v == CU_STREAM_PER_THREAD) {
		*out = LEGACY;
		return OK;
	}
	return get_h(fn, v, H_STREAM, (void **)out);
}

/* ---------- memory ---------- */

static size_t round_page(size_t n) { return (n + page - 1) & ~(page - 1); }

// mem_find returns the allocation whose reserved range holds p, or NULL.
static mem_t *mem_find(uintptr_t p) {
	if (p < va_base || p >= va_next || nmems == 0) return NULL;
	size_t lo = 0, hi = nmems; // the last allocation with base <= p
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (mems[mid]->base <= p) lo = mid; else hi = mid;
	}
	mem_t *m = mems[lo];
	return m->base <= p ? m : NULL;
}

// reg_find returns the registration (live or ended) whose range holds p, or NULL.
static reg_t *reg_find(uintptr_t p) {
	if (nregs == 0 || p < regs[0]->base) return NULL;
	size_t lo = 0, hi = nregs;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (regs[mid]->base <= p) lo = mid; else hi = mid;
	}
	reg_t *r = regs[lo];
	return p - r->base < r->size ? r : NULL;
}

// inject_oom reports whether an injected failure hits this allocation.
static int inject_oom(unsigned kind) {
	if (oom_fail <= 0 || !(oom_kinds & kind)) return 0;
	if (oom_skip > 0) {
		oom_skip--;
		return 0;
	}
	oom_fail--;
	return 1;
}

static int counts_capacity(int kind) { return kind == MK_DEVICE || kind == MK_MANAGED; }

// mem_alloc makes an allocation of real, zeroed memory. Each one gets whole pages,
// and host-visible ones a guard page after them, so that a Go-side overrun faults.
static CUresult mem_alloc(ctx_t *c, int dev, int kind, int api, pool_t *pool, size_t n, unsigned ak, mem_t **out) {
	*out = NULL;
	if (n == 0) return E_INVALID_VALUE;
	if (ak && inject_oom(ak)) return E_OUT_OF_MEMORY;
	if (counts_capacity(kind) && (n > capacity[dev] || dev_used[dev] + n > capacity[dev])) return E_OUT_OF_MEMORY;
	size_t mapped = round_page(n);
	size_t span = mapped + (kind == MK_DEVICE ? 0 : page);
	if (mapped < n || span > va_end - va_next) return E_OUT_OF_MEMORY;
	uintptr_t base = va_next;
	if (mprotect((void *)base, mapped, PROT_READ | PROT_WRITE) != 0) {
		fprintf(stderr, "fakecuda: mprotect of %zu bytes failed: %s (too many live allocations for vm.max_map_count?)\n",
			mapped, strerror(errno));
		return E_OUT_OF_MEMORY;
	}
	// The pages of a pool that processes share are a shared mapping, which
	// cuMemPoolImportPointer maps a second time.
	int shared = pool && pool->ipc_fd;
	if (shared && mmap((void *)base, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
		mprotect((void *)base, mapped, PROT_NONE);
		return E_OUT_OF_MEMORY;
	}
	va_next += span;
	mem_t *m = calloc(1, sizeof *m);
	if (nmems == capmems) {
		capmems = capmems ? capmems * 2 : 1024;
		mems = realloc(mems, capmems * sizeof *mems);
	}
	if (m == NULL || mems == NULL) abort();
	m->r.state = ST_LIVE;
	m->kind = kind;
	m->api = api;
	m->dev = dev;
	m->ctx = c;
	m->pool = pool;
	m->base = base;
	m->size = n;
	m->mapped = mapped;
	m->shared = shared;
	mems[nmems++] = m; // bases only grow: the table stays sorted
	if (c) {
		m->cnext = c->mems;
		c->mems = m;
	}
	if (counts_capacity(kind)) dev_used[dev] += n;
	if (pool) {
		pool->used += n;
		if (pool->used > pool->used_high) pool->used_high = pool->used;
		if (pool->used > pool->reserved_high) pool->reserved_high = pool->used;
	}
	mem_live_n[kind]++;
	mem_live_b[kind] += (int64_t)n;
	allocs_total++;
	*out = m;
	return OK;
}

// mem_release frees m for good: its pages are dropped and made inaccessible, its
// address range is never handed out again.
static void mem_release(mem_t *m) {
	if (m->r.state == ST_FREED) return;
	if (m->r.state == ST_FREE_PENDING) free_pending_n--;
	m->r.state = ST_FREED;
	if (m->imports > 0)
		violation("cuMemFreeAsync", "free of exported allocation %#lx while %d import(s) of it are live (importers free first)",
			(unsigned long)m->base, m->imports);
	if (m->shared) { // drop this mapping's reference to the shared pages, keep the range reserved
		mmap((void *)m->base, m->mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	} else {
		madvise((void *)m->base, m->mapped, MADV_DONTNEED);
		mprotect((void *)m->base, m->mapped, PROT_NONE);
	}
	if (m->src) {
		m->src->imports--;
	} else {
		if (counts_capacity(m->kind)) dev_used[m->dev] -= m->size;
		if (m->pool) m->pool->used -= m->size;
	}
	mem_live_n[m->kind]--;
	mem_live_b[m->kind] -= (int64_t)m->size;
	frees_total++;
}

// regs_first returns the index of the first registration that ends after p.
static size_t regs_first(uintptr_t p) {
	size_t lo = 0, hi = nregs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (regs[mid]->base + regs[mid]->size <= p) lo = mid + 1; else hi = mid;
	}
	return lo;
}

static void regs_insert(reg_t *r) {
	if (nregs == capregs) {
		capregs = capregs ? capregs * 2 : 64;
		regs = realloc(regs, capregs * sizeof *regs);
		if (regs == NULL) abort();
	}
	size_t i = regs_first(r->base);
	memmove(regs + i + 1, regs + i, (nregs - i) * sizeof *regs);
	regs[i] = r;
	nregs++;
}

// Uses of memory named by an API call.
enum { USE_HOST, USE_DEVICE };

// check_range validates [p, p+n), named by fn as a device (USE_DEVICE) or host
// pointer: inside a tracked allocation or registration it must lie entirely within
// one that is live. *ref receives the allocation or registration, NULL for pageable
// (untracked) host memory.
static CUresult check_range(const char *fn, const char *what, uintptr_t p, size_t n, int use, rng_t **ref) {
	*ref = NULL;
	mem_t *m = mem_find(p);
	if (m) {
		if (m->r.state != ST_LIVE) {
			violation(fn, "use of freed memory: %s %#lx in %s allocation [%#lx, +%zu) (%s)", what, (unsigned long)p,
				mkname[m->kind], (unsigned long)m->base, m->size, stname[m->r.state]);
			return E_INVALID_VALUE;
		}
		if (p - m->base >= m->size || n > m->size - (p - m->base)) {
			violation(fn, "out-of-bounds %s: [%#lx, +%zu) is not inside the %s allocation [%#lx, +%zu)", what,
				(unsigned long)p, n, mkname[m->kind], (unsigned long)m->base, m->size);
			return E_INVALID_VALUE;
		}
		*ref = &m->r;
		return OK;
	}
	reg_t *r = reg_find(p);
	if (r && r->r.state == ST_LIVE) {
		if (n > r->size - (p - r->base)) {
			violation(fn, "out-of-bounds %s: [%#lx, +%zu) is not inside the registered host range [%#lx, +%zu)", what,
				(unsigned long)p, n, (unsigned long)r->base, r->size);
			return E_INVALID_VALUE;
		}
		*ref = &r->r;
		return OK;
	}
	if (use == USE_HOST && p == 0) {
		violation(fn, "NULL %s", what);
		return E_INVALID_VALUE;
	}
	if (use == USE_HOST) return OK; // pageable host memory, bounds unknown
	if (r) {
		violation(fn, "use of unregistered host memory: %s %#lx was in the registered range [%#lx, +%zu), since unregistered",
			what, (unsigned long)p, (unsigned long)r->base, r->size);
		return E_INVALID_VALUE;
	}
	violation(fn, "%s %#lx is not device memory (neither allocated nor registered)", what, (unsigned long)p);
	return E_INVALID_VALUE;
}

/* ---------- events ---------- */

static int ev_ran(event_t *e, uint64_t seq) {
	if (seq <= e->done) return 1;
	for (size_t i = 0; i < e->nooo; i++)
		if (e->ooo[i] == seq) return 1;
	return 0;
}

static void ev_done(event_t *e, uint64_t seq) {
	if (seq == e->done + 1) {
		e->done = seq;
		for (int again = 1; again;) { // absorb records that ran ahead
			again = 0;
			for (size_t i = 0; i < e->nooo; i++) {
				if (e->ooo[i] == e->done + 1) {
					e->done++;
					e->ooo[i] = e->ooo[--e->nooo];
					again = 1;
					break;
				}
			}
		}
	} else if (seq > e->done) {
		if (e->nooo == e->capooo) {
			e->capooo = e->capooo ? e->capooo * 2 : 4;
			e->ooo = realloc(e->ooo, e->capooo * sizeof *e->ooo);
			if (e->ooo == NULL) abort();
		}
		e->ooo[e->nooo++] = seq;
	}
	if (seq >= e->ts_seq) {
		e->ts_seq = seq;
		e->ts = now_ns();
	}
}

/* ---------- operations ---------- */

static op_t *free_ops; // operations to reuse (G held): no malloc per call
static void cond_free(op_t *o);
static void cond_clone(op_t *c, const op_t *o);

static op_t *op_new(int type, const char *fn) {
	op_t *o = free_ops;
	if (o) {
		free_ops = o->next;
		memset(o, 0, offsetof(op_t, pbuf));
	} else if ((o = calloc(1, sizeof *o)) == NULL) {
		abort();
	}
	o->type = type;
	o->fn = fn;
	o->refs = o->inl;
	o->caprefs = sizeof o->inl / sizeof o->inl[0];
	return o;
}

static void op_ref(op_t *o, rng_t *r) {
	if (r == NULL) return;
	for (size_t i = 0; i < o->nrefs; i++)
		if (o->refs[i] == r) return;
	if (o->nrefs == o->caprefs) {
		rng_t **n = malloc(2 * o->caprefs * sizeof *n);
		if (n == NULL) abort();
		memcpy(n, o->refs, o->nrefs * sizeof *n);
		if (o->refs != o->inl) free(o->refs);
		o->refs = n;
		o->caprefs *= 2;
	}
	o->refs[o->nrefs++] = r;
}

static void op_free(op_t *o) {
	if (o->refs != o->inl) free(o->refs);
	if (o->type == OP_COPY) free(o->u.cp.staging);
	if (o->type == OP_KERNEL && o->u.k.params != o->pbuf) free(o->u.k.params);
	if (o->type == OP_COND) cond_free(o);
	o->next = free_ops;
	free_ops = o;
}

static op_t *op_clone(const op_t *o) {
	op_t *c = op_new(o->type, o->fn);
	c->u = o->u;
	c->nid = o->nid;
	c->node = o->node;
	for (size_t i = 0; i < o->nrefs; i++) op_ref(c, o->refs[i]);
	if (o->type == OP_COPY && o->u.cp.staging) {
		c->u.cp.staging = malloc(o->u.cp.n);
		if (c->u.cp.staging == NULL) abort();
		memcpy(c->u.cp.staging, o->u.cp.staging, o->u.cp.n);
	}
	if (o->type == OP_KERNEL && o->u.k.params) {
		c->u.k.params = o->u.k.psize <= sizeof c->pbuf ? c->pbuf : malloc(o->u.k.psize);
		if (c->u.k.params == NULL) abort();
		memcpy(c->u.k.params, o->u.k.params, o->u.k.psize);
	}
	if (o->type == OP_COND) cond_clone(c, o);
	return c;
}

static void fill(char *dst, uint32_t val, size_t count, int elem) {
	switch (elem) {
	case 1: memset(dst, (int)(val & 0xff), count); break;
	case 2: for (size_t i = 0; i < count; i++) memcpy(dst + 2 * i, &(uint16_t){(uint16_t)val}, 2); break;
	default: for (size_t i = 0; i < count; i++) memcpy(dst + 4 * i, &val, 4); break;
	}
}

static void run_memset(const op_t *o) {
	size_t rows = o->u.ms.rows ? o->u.ms.rows : 1;
	for (size_t r = 0; r < rows; r++) fill(o->u.ms.dst + r * o->u.ms.pitch, o->u.ms.val, o->u.ms.count, o->u.ms.elem);
}

static void run_copy(const op_t *o) {
	const char *src = o->u.cp.staging ? o->u.cp.staging : o->u.cp.src;
	size_t h = o->u.cp.height ? o->u.cp.height : 1, d = o->u.cp.depth ? o->u.cp.depth : 1;
	if (h == 1 && d == 1) {
		memmove(o->u.cp.dst, src, o->u.cp.n);
		return;
	}
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			memmove(o->u.cp.dst + (z * o->u.cp.dheight + y) * o->u.cp.dpitch, src + (z * o->u.cp.sheight + y) * o->u.cp.spitch,
				o->u.cp.n);
}

static void kick(void) {
	__atomic_add_fetch(&work_gen, 1, __ATOMIC_RELAXED); // the idle executor polls it unlocked
	if (exec_sleeping) pthread_cond_signal(&cv_work);
}

static void notify_done(void) {
	if (done_waiters) pthread_cond_broadcast(&cv_done);
}

static void dump_state(const char *why);

// done_wait waits for cv_done (G held). A wait that lasts long dumps the fake's
// queues to stderr (once per 30 s), to show what a hung test waits for.
static void done_wait(uint64_t *waited_ns) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	done_waiters++;
	int r = pthread_cond_timedwait(&cv_done, &G, &ts);
	done_waiters--;
	if (r == ETIMEDOUT && (*waited_ns += 1000000000ull) % 30000000000ull == 0) dump_state("a synchronizing call has waited 30 s more");
}

// WAIT_WHILE blocks the caller (G held) until cond is false.
#define WAIT_WHILE(cond) \
	do { \
		uint64_t waited_ = 0; \
		while (cond) done_wait(&waited_); \
	} while (0)

// fault_kernel_code is the sticky error a kernel of this name leaves when it runs:
// fault_illegal_address, fault_assert and fault_trap stand for a kernel that writes
// to a bad address, fails a device-side assert or calls __trap(); 0 for others.
static CUresult fault_kernel_code(const char *name) {
	if (strcmp(name, "fault_illegal_address") == 0) return E_ILLEGAL_ADDRESS;
	if (strcmp(name, "fault_assert") == 0) return E_ASSERT;
	if (strcmp(name, "fault_trap") == 0) return E_LAUNCH_FAILED;
	return OK;
}

// exec_op runs o, with G held; it drops G while a kernel "runs" or a host function is
// called. Memory freed before o runs (by an operation another stream ran first) is
// a violation, and o then does not touch it.
static void exec_op(op_t *o) {
	int skip = 0;
	for (size_t i = 0; i < o->nrefs; i++) {
		rng_t *r = o->refs[i];
		if (r->state == ST_FREED) {
			mem_t *m = (mem_t *)r;
			violation(o->fn, "device use after free: the free executed before this operation (%s allocation [%#lx, +%zu), stream %#lx)",
				mkname[m->kind], (unsigned long)m->base, m->size, (unsigned long)(uintptr_t)o->s);
			skip = 1;
		} else if (r->state == ST_UNREG) {
			reg_t *g = (reg_t *)r;
			violation(o->fn, "device use of unregistered host memory: the range [%#lx, +%zu) was unregistered before this operation executed (stream %#lx)",
				(unsigned long)g->base, g->size, (unsigned long)(uintptr_t)o->s);
			skip = 1;
		}
	}
	switch (o->type) {
	case OP_KERNEL:
		if (o->u.k.ns) {
			pthread_mutex_unlock(&G);
			sleep_ns(o->u.k.ns);
			pthread_mutex_lock(&G);
		}
		if (o->u.k.f->mod->h.ctx) {
			CUresult code = fault_kernel_code(o->u.k.f->name);
			if (code && !o->u.k.f->mod->h.ctx->sticky) o->u.k.f->mod->h.ctx->sticky = code;
		}
		break;
	case OP_COPY:
		if (!skip) run_copy(o);
		break;
	case OP_MEMSET:
		if (!skip) run_memset(o);
		break;
	case OP_RECORD:
		ev_done(o->u.ev.e, o->u.ev.seq);
		break;
	case OP_WAIT:
		break;
	case OP_FREE:
		mem_release(o->u.fr.m);
		break;
	case OP_HOSTFN:
		pthread_mutex_unlock(&G);
		o->u.hf.fn(o->u.hf.arg);
		pthread_mutex_lock(&G);
		break;
	case OP_DELAY:
		pthread_mutex_unlock(&G);
		sleep_ns(o->u.dl.ns);
		pthread_mutex_lock(&G);
		break;
	case OP_EMPTY:
		break;
	}
}

static int op_ready(const op_t *o) {
	return o->type != OP_WAIT || ev_ran(o->u.ev.e, o->u.ev.seq);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static uint64_t rnd(void) { // splitmix64
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void active_add(stream_t *s) {
	if (nactive == capactive) {
		capactive = capactive ? capactive * 2 : 64;
		active = realloc(active, capactive * sizeof *active);
		if (active == NULL) abort();
	}
	s->active = (int64_t)nactive;
	active[nactive++] = s;
}

static void active_remove(stream_t *s) {
	size_t i = (size_t)s->active;
	active[i] = active[--nactive];
	active[i]->active = (int64_t)i;
	s->active = -1;
}

// pick returns a random stream among those whose head operation can run.
static stream_t *pick(void) {
	stream_t *chosen = NULL;
	uint64_t k = 0;
	for (size_t i = 0; i < nactive; i++) {
		stream_t *s = active[i];
		if (op_ready(s->head) && rnd() % ++k == 0) chosen = s;
	}
	return chosen;
}

static const char *const opname[] = {"kernel", "copy", "memset", "event record", "event wait", "free", "host function", "delay", "empty",
	"conditional"};

// dump_state prints the queued work (G held).
static void dump_state(const char *why) {
	fprintf(stderr, "fakecuda: %s; %lld operation(s) pending on %zu stream(s)%s:\n", why, (long long)ops_pending, nactive,
		paused ? " (the executor is paused)" : "");
	for (size_t i = 0; i < nactive; i++) {
		stream_t *s = active[i];
		op_t *o = s->head;
		fprintf(stderr, "  stream %#lx (context %#lx%s%s): %llu queued; next: %s from %s", (unsigned long)(uintptr_t)s,
			(unsigned long)(uintptr_t)s->h.ctx, s->h.dead ? ", destroyed" : "", s->h.ctx->h.dead ? ", context destroyed" : "",
			(unsigned long long)(s->enq - s->done), opname[o->type], o->fn);
		if (o->type == OP_WAIT)
			fprintf(stderr, ", for record %llu of event %#lx (records run up to %llu, %llu queued)", (unsigned long long)o->u.ev.seq,
				(unsigned long)(uintptr_t)o->u.ev.e, (unsigned long long)o->u.ev.e->done, (unsigned long long)o->u.ev.e->enq);
		fprintf(stderr, "\n");
	}
	for (size_t i = 0; i < arena_used; i++) {
		hdr *h = (hdr *)(arena + i * SLOT);
		if (h->type == H_CTX && (((ctx_t *)h)->pending || ((ctx_t *)h)->bpending))
			fprintf(stderr, "  context %#lx%s: %lld pending, %lld on blocking streams\n", (unsigned long)(uintptr_t)h,
				h->dead ? " (destroyed)" : "", (long long)((ctx_t *)h)->pending, (long long)((ctx_t *)h)->bpending);
	}
}

static void *executor(void *arg) {
	(void)arg;
	pthread_mutex_lock(&G);
	for (;;) {
		stream_t *s = paused ? NULL : pick();
		if (s == NULL) {
			// Nothing can run: poll for new work a little (a queue-then-query loop
			// then costs no wake-up), then sleep until kicked.
			uint64_t g = __atomic_load_n(&work_gen, __ATOMIC_RELAXED);
			if (spin_ns > 0) {
				pthread_mutex_unlock(&G);
				uint64_t until = now_ns() + (uint64_t)spin_ns;
				for (int i = 0; __atomic_load_n(&work_gen, __ATOMIC_RELAXED) == g; i++) {
					if ((i & 63) == 0 && now_ns() > until) break;
					cpu_relax();
				}
				pthread_mutex_lock(&G);
			}
			if (__atomic_load_n(&work_gen, __ATOMIC_RELAXED) == g) {
				exec_sleeping = 1;
				while (__atomic_load_n(&work_gen, __ATOMIC_RELAXED) == g) pthread_cond_wait(&cv_work, &G);
				exec_sleeping = 0;
			}
			continue;
		}
		op_t *o = s->head;
		exec_op(o);
		s->head = o->next;
		if (s->head == NULL) {
			s->tail = NULL;
			active_remove(s);
		}
		s->done++;
		ctx_t *c = s->h.ctx;
		c->pending--;
		if (!(s->flags & CU_STREAM_NON_BLOCKING)) c->bpending--;
		ops_pending--;
		ops_executed++;
		op_free(o);
		notify_done();
	}
	return NULL;
}

static void start_executor(void) {
	// Signals go to Go's threads, not to this one.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	if (pthread_create(&t, &a, executor, NULL) != 0) {
		fprintf(stderr, "fakecuda: cannot start the executor thread\n");
		abort();
	}
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

// run_legacy runs o as the legacy default stream does: after all the blocking
// streams of c are idle, synchronously, on the calling thread.
static void run_legacy(ctx_t *c, op_t *o) {
	WAIT_WHILE(c->bpending > 0);
	if (o->type == OP_RECORD) o->u.ev.seq = ++o->u.ev.e->enq;
	if (o->type == OP_WAIT) {
		uint64_t t = o->u.ev.e->enq;
		WAIT_WHILE(!ev_ran(o->u.ev.e, t));
	}
	exec_op(o);
	ops_executed++;
	if (o->type == OP_RECORD) kick(); // waits on other streams may now run
	op_free(o);
	notify_done();
}

static uint64_t nid_seq; // node numbers handed out (G held)

static void graph_append(graph_t *g, op_t *o) {
	if (o->nid == 0) o->nid = ++nid_seq; // a captured operation: a node of its own
	o->next = NULL;
	if (g->tail) g->tail->next = o; else g->head = o;
	g->tail = o;
	g->n++;
}

// submit queues o on s (LEGACY: runs it now, see run_legacy), or adds it to the
// graph s captures. G held.
static void submit(ctx_t *c, stream_t *s, op_t *o) {
	if (s == LEGACY) {
		run_legacy(c, o);
		return;
	}
	if (s->capture) {
		graph_append(s->capture, o);
		return;
	}
	if (o->type == OP_RECORD) o->u.ev.seq = ++o->u.ev.e->enq;
	if (o->type == OP_WAIT) {
		o->u.ev.seq = o->u.ev.e->enq; // the latest record, now
		if (ev_ran(o->u.ev.e, o->u.ev.seq)) {
			op_free(o);
			return;
		}
	}
	pthread_once(&exec_once, start_executor);
	o->s = s;
	o->next = NULL;
	if (s->tail) s->tail->next = o;
	else {
		s->head = o;
		active_add(s);
	}
	s->tail = o;
	s->enq++;
	ctx_t *sc = s->h.ctx;
	sc->pending++;
	if (!(s->flags & CU_STREAM_NON_BLOCKING)) sc->bpending++;
	ops_pending++;
	kick();
}

// wait_stream blocks until the operations queued on s so far have run.
static void wait_stream(stream_t *s) {
	uint64_t t = s->enq;
	WAIT_WHILE(s->done < t);
}

/* ---------- context destruction ---------- */

static void inject_slow(int k) {
	int64_t ns = __atomic_load_n(&slow_ns[k], __ATOMIC_RELAXED);
	if (ns > 0) sleep_ns((uint64_t)ns);
}

static int inject_fail(int k) {
	int code = fail_code[k];
	fail_code[k] = 0;
	return code;
}

static void module_kill(module_t *m) {
	h_kill(&m->h);
	for (func_t *f = m->funcs; f; f = f->next) h_kill(&f->h);
	for (gvar_t *g = m->globals; g; g = g->next) mem_release(g->m);
}

// ctx_wipe destroys everything created in c but its pools and their memory: streams,
// events, modules and their functions, graphs, other allocations and registrations.
// c's work has finished.
static void ctx_wipe(ctx_t *c) {
	c->npeers = 0; // its peer access goes with it
	for (hdr *h = c->objs; h; h = h->cnext) {
		// Memory pools belong to the device, not to the context that made them
		// (as on the real driver): they outlive it.
		if (h->dead || h->type == H_POOL) continue;
		if (h->type == H_MODULE) module_kill((module_t *)h);
		else if (h->type != H_FUNC) h_kill(h); // functions go with their modules
	}
	// So does their memory: measured on an H200 (driver 580), stream-ordered
	// allocations made in a context stay allocated after cuCtxDestroy. The rest of
	// the context's memory goes with it.
	for (mem_t *m = c->mems; m; m = m->cnext) {
		if (m->pool == NULL) mem_release(m);
	}
	for (reg_t *r = c->regs; r; r = r->cnext) {
		if (r->r.state == ST_LIVE) {
			r->r.state = ST_UNREG;
			regs_live--;
			regs_ended++;
		}
	}
}

// ctx_pop_current pops a destroyed context from the calling thread's stack if it is
// on top, as the driver does (other threads keep it current, dangling).
static void ctx_pop_current(ctx_t *c) {
	if (tl_depth && tl_stack[tl_depth - 1] == c) tl_depth--;
}

/* ================================================================================
 * Control API (both modes; injections act in strict mode only)
 * ================================================================================ */

EXPORT int fakecuda_strict(void) { return strict(); }

EXPORT int64_t fakecuda_violations(char *buf, int64_t n) {
	pthread_mutex_lock(&vmu);
	int64_t count = vcount;
	if (buf && n > 0) {
		int64_t w = 0;
		for (int64_t i = 0; i < count && i < VMAX; i++) {
			size_t l = strlen(vmsgs[i]);
			if (w + (int64_t)l + 1 >= n) break;
			memcpy(buf + w, vmsgs[i], l);
			w += (int64_t)l;
			buf[w++] = '\n';
		}
		buf[w < n ? w : n - 1] = 0;
	}
	pthread_mutex_unlock(&vmu);
	return count;
}

EXPORT void fakecuda_reset_violations(void) {
	pthread_mutex_lock(&vmu);
	vcount = 0;
	pthread_mutex_unlock(&vmu);
}

EXPORT int64_t fakecuda_launch_count(void) {
	pthread_mutex_lock(&G);
	int64_t n = launch_seq;
	pthread_mutex_unlock(&G);
	return n;
}

// fakecuda_launch_size lets the Go side check that its copy of the struct matches.
EXPORT int64_t fakecuda_launch_size(void) { return (int64_t)sizeof(fakecuda_launch); }

// fakecuda_launch_get copies launch number seq (1 is the first) to *out: 0, or -1 if
// there is no such launch or it has left the ring of the last 4096.
EXPORT int fakecuda_launch_get(int64_t seq, fakecuda_launch *out) {
	int r = -1;
	pthread_mutex_lock(&G);
	if (ring && seq >= 1 && seq <= launch_seq && seq > launch_seq - RING) {
		memcpy(out, &ring[(seq - 1) % RING], sizeof *out);
		r = 0;
	}
	pthread_mutex_unlock(&G);
	return r;
}

// Counters, in this order (fakecuda_counters writes the first n).
enum {
	C_DEVICE_ALLOCS, C_DEVICE_BYTES, C_HOST_ALLOCS, C_HOST_BYTES, C_MANAGED_ALLOCS, C_MANAGED_BYTES,
	C_FREE_PENDING, C_ALLOCS_TOTAL, C_FREES_TOTAL,
	C_STREAMS, C_EVENTS, C_MODULES, C_FUNCTIONS, C_CONTEXTS, C_POOLS, C_GRAPHS, C_GRAPH_EXECS, C_REGISTRATIONS,
	C_STREAMS_DESTROYED, C_EVENTS_DESTROYED, C_MODULES_DESTROYED, C_FUNCTIONS_DESTROYED, C_CONTEXTS_DESTROYED,
	C_POOLS_DESTROYED, C_GRAPHS_DESTROYED, C_GRAPH_EXECS_DESTROYED, C_REGISTRATIONS_ENDED,
	C_OPS_PENDING, C_OPS_EXECUTED, C_LAUNCHES, C_VIOLATIONS, C_N
};

EXPORT int fakecuda_counters(int64_t *out, int n) {
	int64_t v[C_N] = {0};
	pthread_mutex_lock(&G);
	v[C_DEVICE_ALLOCS] = mem_live_n[MK_DEVICE];
	v[C_DEVICE_BYTES] = mem_live_b[MK_DEVICE];
	v[C_HOST_ALLOCS] = mem_live_n[MK_HOST];
	v[C_HOST_BYTES] = mem_live_b[MK_HOST];
	v[C_MANAGED_ALLOCS] = mem_live_n[MK_MANAGED];
	v[C_MANAGED_BYTES] = mem_live_b[MK_MANAGED];
	v[C_FREE_PENDING] = free_pending_n;
	v[C_ALLOCS_TOTAL] = allocs_total;
	v[C_FREES_TOTAL] = frees_total;
	for (int t = H_CTX; t < H_NODE; t++) { // C_STREAMS.. follow the handle types' order below (graph nodes are not counted)
		static const int live_idx[H_NODE] = {0, C_CONTEXTS, C_STREAMS, C_EVENTS, C_MODULES, C_FUNCTIONS, C_POOLS, C_GRAPHS, C_GRAPH_EXECS};
		static const int dead_idx[H_NODE] = {0, C_CONTEXTS_DESTROYED, C_STREAMS_DESTROYED, C_EVENTS_DESTROYED, C_MODULES_DESTROYED,
			C_FUNCTIONS_DESTROYED, C_POOLS_DESTROYED, C_GRAPHS_DESTROYED, C_GRAPH_EXECS_DESTROYED};
		v[live_idx[t]] = live_h[t];
		v[dead_idx[t]] = dead_h[t];
	}
	// Default pools belong to their devices and live forever: not counted.
	for (int d = 0; d < MAXDEV; d++)
		if (def_pool[d]) v[C_POOLS]--;
	v[C_REGISTRATIONS] = regs_live;
	v[C_REGISTRATIONS_ENDED] = regs_ended;
	v[C_OPS_PENDING] = ops_pending;
	v[C_OPS_EXECUTED] = ops_executed;
	v[C_LAUNCHES] = launch_seq;
	pthread_mutex_unlock(&G);
	pthread_mutex_lock(&vmu);
	v[C_VIOLATIONS] = vcount;
	pthread_mutex_unlock(&vmu);
	int k = n < C_N ? n : C_N;
	if (out && k > 0) memcpy(out, v, (size_t)k * sizeof *out);
	return C_N;
}

// The struct layouts and constants the fake copies from cuda.h, as C expressions of
// the header and their values here: fakecuda_layout reports them, for TestLayout.
#define LAY_SIZE(T) {"sizeof(" #T ")", sizeof(T)}, {"_Alignof(" #T ")", _Alignof(T)}
#define LAY_FIELD(T, f) {"offsetof(" #T ", " #f ")", offsetof(T, f)}, {"sizeof(((" #T " *)0)->" #f ")", sizeof(((T *)0)->f)}
#define LAY_CONST(c) {#c, (uint64_t)(c)}
static const struct { const char *expr; uint64_t v; } layout_items[] = {
	LAY_SIZE(CUmemLocation), LAY_FIELD(CUmemLocation, type), LAY_FIELD(CUmemLocation, id),
	LAY_SIZE(CUmemPoolProps), LAY_FIELD(CUmemPoolProps, allocType), LAY_FIELD(CUmemPoolProps, handleTypes),
	LAY_FIELD(CUmemPoolProps, location), LAY_FIELD(CUmemPoolProps, win32SecurityAttributes), LAY_FIELD(CUmemPoolProps, maxSize),
	LAY_FIELD(CUmemPoolProps, usage), LAY_FIELD(CUmemPoolProps, reserved),
	LAY_SIZE(CUmemAccessDesc), LAY_FIELD(CUmemAccessDesc, location), LAY_FIELD(CUmemAccessDesc, flags),
	LAY_SIZE(CUDA_MEMSET_NODE_PARAMS), LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, dst), LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, pitch),
	LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, value), LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, elementSize),
	LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, width), LAY_FIELD(CUDA_MEMSET_NODE_PARAMS, height),
	LAY_SIZE(CUDA_MEMCPY3D), LAY_FIELD(CUDA_MEMCPY3D, srcXInBytes), LAY_FIELD(CUDA_MEMCPY3D, srcY), LAY_FIELD(CUDA_MEMCPY3D, srcZ),
	LAY_FIELD(CUDA_MEMCPY3D, srcLOD), LAY_FIELD(CUDA_MEMCPY3D, srcMemoryType), LAY_FIELD(CUDA_MEMCPY3D, srcHost),
	LAY_FIELD(CUDA_MEMCPY3D, srcDevice), LAY_FIELD(CUDA_MEMCPY3D, srcArray), LAY_FIELD(CUDA_MEMCPY3D, reserved0),
	LAY_FIELD(CUDA_MEMCPY3D, srcPitch), LAY_FIELD(CUDA_MEMCPY3D, srcHeight), LAY_FIELD(CUDA_MEMCPY3D, dstXInBytes),
	LAY_FIELD(CUDA_MEMCPY3D, dstY), LAY_FIELD(CUDA_MEMCPY3D, dstZ), LAY_FIELD(CUDA_MEMCPY3D, dstLOD),
	LAY_FIELD(CUDA_MEMCPY3D, dstMemoryType), LAY_FIELD(CUDA_MEMCPY3D, dstHost), LAY_FIELD(CUDA_MEMCPY3D, dstDevice),
	LAY_FIELD(CUDA_MEMCPY3D, dstArray), LAY_FIELD(CUDA_MEMCPY3D, reserved1), LAY_FIELD(CUDA_MEMCPY3D, dstPitch),
	LAY_FIELD(CUDA_MEMCPY3D, dstHeight), LAY_FIELD(CUDA_MEMCPY3D, WidthInBytes), LAY_FIELD(CUDA_MEMCPY3D, Height),
	LAY_FIELD(CUDA_MEMCPY3D, Depth),
	LAY_SIZE(CUDA_KERNEL_NODE_PARAMS), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, func), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimX),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimY), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimZ),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimX), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimY),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimZ), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, sharedMemBytes),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, kernelParams), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, extra),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, kern), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS, ctx),
	LAY_SIZE(CUDA_KERNEL_NODE_PARAMS_v1), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS_v1, func),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS_v1, sharedMemBytes), LAY_FIELD(CUDA_KERNEL_NODE_PARAMS_v1, kernelParams),
	LAY_FIELD(CUDA_KERNEL_NODE_PARAMS_v1, extra),
	LAY_SIZE(CUgraphEdgeData), LAY_FIELD(CUgraphEdgeData, from_port), LAY_FIELD(CUgraphEdgeData, to_port),
	LAY_FIELD(CUgraphEdgeData, type), LAY_FIELD(CUgraphEdgeData, reserved),
	LAY_SIZE(CUgraphExecUpdateResultInfo), LAY_FIELD(CUgraphExecUpdateResultInfo, result),
	LAY_FIELD(CUgraphExecUpdateResultInfo, errorNode), LAY_FIELD(CUgraphExecUpdateResultInfo, errorFromNode),
	LAY_SIZE(CUDA_CONDITIONAL_NODE_PARAMS), LAY_FIELD(CUDA_CONDITIONAL_NODE_PARAMS, handle),
	LAY_FIELD(CUDA_CONDITIONAL_NODE_PARAMS, type), LAY_FIELD(CUDA_CONDITIONAL_NODE_PARAMS, size),
	LAY_FIELD(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out), LAY_FIELD(CUDA_CONDITIONAL_NODE_PARAMS, ctx),
	LAY_SIZE(CUgraphNodeParams), LAY_FIELD(CUgraphNodeParams, type), LAY_FIELD(CUgraphNodeParams, reserved0),
	LAY_FIELD(CUgraphNodeParams, reserved2),
	LAY_CONST(CU_GRAPH_NODE_TYPE_CONDITIONAL), LAY_CONST(CU_GRAPH_COND_TYPE_IF), LAY_CONST(CU_GRAPH_COND_TYPE_WHILE),
	LAY_CONST(CU_GRAPH_COND_TYPE_SWITCH), LAY_CONST(CU_GRAPH_COND_ASSIGN_DEFAULT),
	LAY_CONST(CU_MEMORYTYPE_HOST), LAY_CONST(CU_MEMORYTYPE_DEVICE), LAY_CONST(CU_MEMORYTYPE_ARRAY), LAY_CONST(CU_MEMORYTYPE_UNIFIED),
	LAY_CONST(CU_GRAPH_NODE_TYPE_KERNEL), LAY_CONST(CU_GRAPH_NODE_TYPE_MEMCPY), LAY_CONST(CU_GRAPH_NODE_TYPE_MEMSET),
	LAY_CONST(CU_GRAPH_NODE_TYPE_HOST), LAY_CONST(CU_GRAPH_NODE_TYPE_GRAPH), LAY_CONST(CU_GRAPH_NODE_TYPE_EMPTY),
	LAY_CONST(CU_GRAPH_NODE_TYPE_WAIT_EVENT), LAY_CONST(CU_GRAPH_NODE_TYPE_EVENT_RECORD),
	LAY_CONST(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC), LAY_CONST(CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER),
	LAY_CONST(CU_STREAM_CAPTURE_STATUS_NONE), LAY_CONST(CU_STREAM_CAPTURE_STATUS_ACTIVE),
	LAY_CONST(CU_STREAM_CAPTURE_STATUS_INVALIDATED), LAY_CONST(CU_STREAM_CAPTURE_MODE_RELAXED),
	LAY_CONST(CU_LAUNCH_PARAM_END), LAY_CONST(CU_LAUNCH_PARAM_BUFFER_POINTER), LAY_CONST(CU_LAUNCH_PARAM_BUFFER_SIZE),
	{"CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED", UPD_TOPOLOGY_CHANGED},
	{"CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED", UPD_NODE_TYPE_CHANGED},
	{"CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED", UPD_FUNCTION_CHANGED},
	{"CUDA_ERROR_LOSSY_QUERY", E_LOSSY_QUERY}, {"CUDA_ERROR_ILLEGAL_STATE", E_ILLEGAL_STATE},
	{"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", E_STREAM_CAPTURE_UNSUPPORTED},
	{"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", E_STREAM_CAPTURE_INVALIDATED},
	{"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", E_GRAPH_EXEC_UPDATE_FAILURE},
};

// fakecuda_layout writes the layout items to buf, "expression value" a line,
// NUL-terminated within n, and returns the length of the whole text.
EXPORT int64_t fakecuda_layout(char *buf, int64_t n) {
	int64_t w = 0;
	for (size_t i = 0; i < sizeof layout_items / sizeof layout_items[0]; i++) {
		char line[160];
		int k = snprintf(line, sizeof line, "%s %llu\n", layout_items[i].expr, (unsigned long long)layout_items[i].v);
		if (buf && w + k < n) memcpy(buf + w, line, (size_t)k + 1);
		w += k;
	}
	if (buf && n > 0 && w >= n) buf[0] = 0;
	return w;
}

// fakecuda_hostfn_add is a host function for cuLaunchHostFunc in tests: it adds 1
// to the int64_t at p.
EXPORT void fakecuda_hostfn_add(void *p) { __atomic_add_fetch((int64_t *)p, 1, __ATOMIC_SEQ_CST); }

// fakecuda_control changes the fake's behaviour; see README.md for the commands. It
// returns 0, or -1 for an unknown command or a bad argument.
EXPORT int fakecuda_control(const char *cmd, int64_t a, int64_t b) {
	if (cmd == NULL) return -1;
	strict();
	int r = 0;
	pthread_mutex_lock(&G);
	if (strcmp(cmd, "oom_at") == 0) { // allocation a from now (1 = the next) and b-1 more fail
		if (a < 1) r = -1;
		else {
			oom_skip = a - 1;
			oom_fail = b < 1 ? 1 : b;
		}
	} else if (strcmp(cmd, "oom_kinds") == 0) { // 1 device, 2 pool, 4 pinned host, 8 managed
		if (a < 0 || a > 15) r = -1;
		else oom_kinds = (unsigned)a;
	} else if (strcmp(cmd, "fail_destroy") == 0) { // kind a: the next destroy returns b
		if (a < 0 || a >= DK_N || b == 0) r = -1;
		else fail_code[a] = (int)b;
	} else if (strcmp(cmd, "slow_destroy_us") == 0) { // kind a: destroys take b µs (0: off)
		if (a < 0 || a >= DK_N || b < 0) r = -1;
		else __atomic_store_n(&slow_ns[a], b * 1000, __ATOMIC_RELAXED);
	} else if (strcmp(cmd, "kernel_ns") == 0) {
		if (a < 0) r = -1;
		else kernel_ns = (uint64_t)a;
	} else if (strcmp(cmd, "capacity") == 0) { // a bytes for device b (-1: all)
		if (a < 0 || b >= MAXDEV) r = -1;
		else
			for (int d = 0; d < MAXDEV; d++)
				if (b < 0 || d == b) capacity[d] = (uint64_t)a;
	} else if (strcmp(cmd, "seed") == 0) {
		seed = (uint64_t)a;
		rng = seed * 0x9e3779b97f4a7c15ull + 1;
	} else if (strcmp(cmd, "pause") == 0) { // a != 0: the executor runs nothing until resumed
		paused = a != 0;
		if (!paused) kick();
	} else if (strcmp(cmd, "abort") == 0) {
		__atomic_store_n(&abort_on, a != 0, __ATOMIC_RELAXED);
	} else if (strcmp(cmd, "verbose") == 0) {
		__atomic_store_n(&verbose, a != 0, __ATOMIC_RELAXED);
	} else if (strcmp(cmd, "dump") == 0) {
		dump_state("dump");
	} else if (strcmp(cmd, "delay") == 0) { // queue a delay of a ns on stream b (keeps it busy)
		hdr *h = h_at((uintptr_t)b);
		if (a < 0 || h == NULL || h->type != H_STREAM || h->dead) r = -1;
		else {
			op_t *o = op_new(OP_DELAY, "fakecuda_control(delay)");
			o->u.dl.ns = (uint64_t)a;
			submit(h->ctx, (stream_t *)h, o);
		}
	} else if (strcmp(cmd, "peer") == 0) { // b == 0: device a has no peer access; b != 0: it has (the default)
		if (a < 0 || a >= MAXDEV) r = -1;
		else if (b) __atomic_and_fetch(&no_peer, ~(1ull << a), __ATOMIC_RELAXED);
		else __atomic_or_fetch(&no_peer, 1ull << a, __ATOMIC_RELAXED);
	} else if (strcmp(cmd, "reset_injections") == 0) {
		oom_skip = oom_fail = 0;
		oom_kinds = 15;
		for (int k = 0; k < DK_N; k++) {
			fail_code[k] = 0;
			__atomic_store_n(&slow_ns[k], 0, __ATOMIC_RELAXED);
		}
		kernel_ns = 0;
		if (paused) {
			paused = 0;
			kick();
		}
	} else {
		r = -1;
	}
	pthread_mutex_unlock(&G);
	return r;
}

/* ================================================================================
 * Driver API
 * ================================================================================ */

// Strict-mode entry: the lock, and a failure exit.
// fault_exempt reports whether fn still works with a faulted context current: the
// calls that manage the current context, ask about devices, or destroy the context,
// and those that make another context (on a real driver the fault ends the device
// for the process; here it ends the one context, so that tests can go on).
static int fault_exempt(const char *fn) {
	static const char *const ok[] = {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
		"cuCtxGetDevice", "cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
		"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxRetain", "cuCtxCreate", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute",
		"cuDeviceGetName", "cuDeviceTotalMem", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString", NULL};
	for (int i = 0; ok[i]; i++) {
		size_t n = strlen(ok[i]); // cuCtxDestroy stands for cuCtxDestroy_v2 too
		if (strncmp(fn, ok[i], n) == 0 && (fn[n] == 0 || fn[n] == '_')) return 1;
	}
	return 0;
}

#define BEGIN(name) \
	static const char FN[] __attribute__((unused)) = name; \
	BEGIN_AS_FN
// BEGIN for a body that several entry points share: they pass their name as FN.
#define BEGIN_AS_FN \
	CUresult r = OK; \
	pthread_mutex_lock(&G); \
	if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) { r = E_NOT_INITIALIZED; goto out; } \
	if (cur_ctx() != NULL && cur_ctx()->sticky && !fault_exempt(FN)) { r = cur_ctx()->sticky; goto out; }
#define END \
	out: \
	pthread_mutex_unlock(&G); \
	return r;
#define FAIL(code) do { r = (code); goto out; } while (0)
// STICKY_AFTER_WAIT ends a wait or query: work that faulted meanwhile is its error.
#define STICKY_AFTER_WAIT do { if (r == OK && cur_ctx() != NULL && cur_ctx()->sticky) r = cur_ctx()->sticky; } while (0)
#define TRY(call) do { if ((r = (call)) != OK) goto out; } while (0)
#define CHECK_DEV(d) do { if ((d) < 0 || (d) >= ndev) FAIL(E_INVALID_DEVICE); } while (0)

/* ---------- initialization and devices ---------- */

EXPORT CUresult cuInit(unsigned flags) {
	if (!strict()) return OK;
	if (flags != 0) return E_INVALID_VALUE;
	if (ndev == 0) return E_NO_DEVICE;
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return OK;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
	if (!strict()) { *n = ndev; return OK; }
	BEGIN("cuDeviceGetCount");
	if (n == NULL) FAIL(E_INVALID_VALUE);
	*n = ndev;
	END
}

EXPORT CUresult cuDeviceGet(int *d, int ordinal) {
	if (!strict()) { *d = ordinal; return ordinal >= 0 && ordinal < ndev ? OK : E_INVALID_DEVICE; }
	BEGIN("cuDeviceGet");
	if (d == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(ordinal);
	*d = ordinal;
	END
}

static int attribute(int attr, int *v) {
	switch (attr) {
	case 1: *v = 1024; break;       // MAX_THREADS_PER_BLOCK
	case 2: case 3: *v = 1024; break; // MAX_BLOCK_DIM_X, Y
	case 4: *v = 64; break;         // MAX_BLOCK_DIM_Z
	case 5: *v = 2147483647; break; // MAX_GRID_DIM_X
	case 6: case 7: *v = 65535; break;
	case 8: *v = 48 * 1024; break;  // MAX_SHARED_MEMORY_PER_BLOCK
	case 9: *v = 65536; break;      // TOTAL_CONSTANT_MEMORY
	case 10: *v = 32; break;        // WARP_SIZE
	case 11: *v = 2147483647; break; // MAX_PITCH
	case 12: *v = 65536; break;     // MAX_REGISTERS_PER_BLOCK
	case 13: *v = 1980000; break;   // CLOCK_RATE (kHz)
	case 14: case 30: *v = 512; break; // TEXTURE_ALIGNMENT, SURFACE_ALIGNMENT
	case 16: *v = 132; break;       // MULTIPROCESSOR_COUNT
	case 17: case 18: case 20: case 35: *v = 0; break; // timeout, integrated, compute mode default, TCC
	case 36: *v = 2619000; break;   // MEMORY_CLOCK_RATE
	case 37: *v = 5120; break;      // GLOBAL_MEMORY_BUS_WIDTH
	case 38: *v = 50 * 1024 * 1024; break; // L2_CACHE_SIZE
	case 39: *v = 2048; break;      // MAX_THREADS_PER_MULTIPROCESSOR
	case 40: *v = 3; break;         // ASYNC_ENGINE_COUNT
	case 34: case 50: *v = 0; break; // PCI device, domain
	case 75: *v = 9; break;         // COMPUTE_CAPABILITY_MAJOR
	case 76: *v = 0; break;         // MINOR
	case 81: *v = 233472; break;    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	case 82: *v = 65536; break;     // MAX_REGISTERS_PER_MULTIPROCESSOR
	case 84: case 85: case 86: *v = 0; break; // multi-GPU board, group, host native atomics
	case 87: *v = 2; break;         // SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO
	case 88: *v = 0; break;         // PAGEABLE_MEMORY_ACCESS: device use of pageable memory is an error
	case 92: case 93: case 94: *v = 0; break; // stream memory operations: not implemented
	case 96: *v = 0; break;         // COOPERATIVE_MULTI_DEVICE_LAUNCH
	case 97: *v = 232448; break;    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
	case 98: case 100: case 101: *v = 0; break;
	case 102: case 103: case 104: case 105: *v = 0; break; // VMM and shareable handles: not implemented
	case 106: *v = 32; break;       // MAX_BLOCKS_PER_MULTIPROCESSOR
	case 107: *v = 0; break;
	case 108: *v = 82837504; break; // MAX_PERSISTING_L2_CACHE_SIZE
	case 109: *v = 134213632; break; // MAX_ACCESS_POLICY_WINDOW_SIZE
	case 110: case 112: case 114: case 116: case 117: case 118: case 119: *v = 0; break;
	case 111: *v = 1024; break;     // RESERVED_SHARED_MEMORY_PER_BLOCK
	case 121: case 122: case 123: case 124: case 125: *v = 0; break; // IPC, dma-buf: not implemented
	case 126: *v = 4; break;        // MEM_SYNC_DOMAIN_COUNT
	case 128: case 129: case 130: case 132: case 133: *v = 0; break;
	case 131: case 134: *v = -1; break; // NUMA ids
	case 135: case 136: case 137: case 138: case 140: case 141: case 142: case 143: case 145: case 146: case 147: *v = 0; break;
	case 139: return E_INVALID_VALUE; // no such attribute
	default:
		if (attr <= 0 || attr >= CU_DEVICE_ATTRIBUTE_MAX) return E_INVALID_VALUE;
		*v = 1; // supported / present: unified addressing (41), managed memory (83),
		        // concurrent managed access (89), memory pools (115), and the rest
	}
	return OK;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
	if (!strict()) {
		if (attribute(attr, v) != OK) *v = 1;
		return OK;
	}
	BEGIN("cuDeviceGetAttribute");
	if (v == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	TRY(attribute(attr, v));
	if (attr == 33) *v = dev + 1; // PCI_BUS_ID
	END
}

EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, int dev) {
	(void)dev;
	if (major) *major = 9;
	if (minor) *minor = 0;
	return OK;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int dev) {
	if (!strict()) { *b = capacity[0]; return OK; }
	BEGIN("cuDeviceTotalMem_v2");
	if (b == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	*b = capacity[dev];
	END
}

EXPORT CUresult cuDeviceGetName(char *name, int len, int dev) {
	if (!strict()) {
		if (len > 0) { strncpy(name, "Fake CUDA Device", (size_t)len); name[len - 1] = 0; }
		return OK;
	}
	BEGIN("cuDeviceGetName");
	if (name == NULL || len <= 0) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	snprintf(name, (size_t)len, "%s", "Fake CUDA Device");
	END
}

EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int dev) {
	if (uuid == NULL) return E_INVALID_VALUE;
	memset(uuid, 0, 16);
	memcpy(uuid, "fakecuda", 8);
	uuid[15] = (unsigned char)dev;
	return OK;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, int dev) {
	if (id == NULL || len <= 0) return E_INVALID_VALUE;
	snprintf(id, (size_t)len, "0000:%02x:00.0", dev + 1);
	return OK;
}

// peer_ok reports whether devices a and b may access each other's memory: two
// distinct devices, neither cut off by the control command "peer".
static int peer_ok(int a, int b) {
	uint64_t np = __atomic_load_n(&no_peer, __ATOMIC_RELAXED);
	return a != b && a >= 0 && b >= 0 && a < ndev && b < ndev && !(np >> a & 1) && !(np >> b & 1);
}

EXPORT CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) {
	if (can == NULL) return E_INVALID_VALUE;
	if (dev < 0 || dev >= ndev || peer < 0 || peer >= ndev) return E_INVALID_DEVICE;
	*can = peer_ok(dev, peer);
	return OK;
}

// CUdevice_P2PAttribute values.
enum { P2P_PERFORMANCE_RANK = 1, P2P_ACCESS_SUPPORTED, P2P_NATIVE_ATOMIC_SUPPORTED, P2P_CUDA_ARRAY_ACCESS_SUPPORTED,
	P2P_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED };

// cuDeviceGetP2PAttribute: a pair that can access each other is of rank 0 with native
// atomics and array access; the same device twice is CUDA_ERROR_INVALID_DEVICE.
EXPORT CUresult cuDeviceGetP2PAttribute(int *v, int attr, int src, int dst) {
	if (v == NULL) return E_INVALID_VALUE;
	if (src < 0 || src >= ndev || dst < 0 || dst >= ndev || src == dst) return E_INVALID_DEVICE;
	int ok = peer_ok(src, dst);
	switch (attr) {
	case P2P_PERFORMANCE_RANK: *v = 0; break;
	case P2P_ACCESS_SUPPORTED:
	case P2P_NATIVE_ATOMIC_SUPPORTED:
	case P2P_CUDA_ARRAY_ACCESS_SUPPORTED: *v = ok; break;
	case P2P_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED: *v = 0; break;
	default: return E_INVALID_VALUE;
	}
	return OK;
}

/* ---------- contexts ---------- */

static ctx_t *ctx_new(int dev, unsigned flags, int primary) {
	ctx_t *c = h_new(H_CTX, NULL);
	if (c == NULL) return NULL;
	c->h.ctx = c;
	c->dev = dev;
	c->flags = flags;
	c->primary = primary;
	return c;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(H *out, int dev) {
	if (!strict()) { *out = fast_primary; return OK; }
	BEGIN("cuDevicePrimaryCtxRetain");
	if (out == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	if (prim[dev] == NULL) {
		if ((prim[dev] = ctx_new(dev, prim_flags[dev], 1)) == NULL) FAIL(E_OUT_OF_MEMORY);
	} else if (prim[dev]->h.dead) {
		// The driver keeps one primary context per device: reactivated, the same
		// handle is valid again (its old streams, memory... stay destroyed).
		__atomic_store_n(&prim[dev]->h.dead, 0, __ATOMIC_RELEASE);
		prim[dev]->flags = prim_flags[dev];
		live_h[H_CTX]++;
		dead_h[H_CTX]--;
	}
	prim_refs[dev]++;
	*out = (H)prim[dev];
	END
}

// prim_reset destroys the primary context's objects, after its work (G held).
static void prim_reset(int dev) {
	ctx_t *c = prim[dev];
	if (c == NULL || c->h.dead) return;
	WAIT_WHILE(c->pending > 0);
	ctx_wipe(c);
	h_kill(&c->h);
	prim_refs[dev] = 0;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	if (!strict()) return OK;
	BEGIN("cuDevicePrimaryCtxRelease_v2");
	CHECK_DEV(dev);
	if (prim_refs[dev] == 0) {
		violation(FN, "release of device %d's primary context, which is not retained", dev);
		FAIL(E_INVALID_CONTEXT);
	}
	if (--prim_refs[dev] == 0) prim_reset(dev);
	END
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(int dev) {
	if (!strict()) return OK;
	BEGIN("cuDevicePrimaryCtxReset_v2");
	CHECK_DEV(dev);
	prim_reset(dev);
	END
}

EXPORT CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active_out) {
	if (!strict()) { *flags = 0; *active_out = 0; return OK; }
	BEGIN("cuDevicePrimaryCtxGetState");
	if (flags == NULL || active_out == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	*flags = prim_flags[dev];
	*active_out = prim_refs[dev] > 0;
	END
}

EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(int dev, unsigned flags) {
	if (!strict()) return OK;
	BEGIN("cuDevicePrimaryCtxSetFlags_v2");
	CHECK_DEV(dev);
	prim_flags[dev] = flags;
	if (prim[dev]) prim[dev]->flags = flags;
	END
}

// ctx_create is cuCtxCreate_v4 without CUctxCreateParams, and cuCtxCreate_v2: the
// entry point that drivers before CUDA 12.5 have instead.
static CUresult ctx_create(const char *FN, H *out, unsigned flags, int dev) {
	(void)FN; // no violation to name it in
	if (!strict()) { *out = fast_handle(); fast_current = *out; return OK; }
	BEGIN_AS_FN
	if (out == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	if (tl_depth == CTX_STACK) FAIL(E_OUT_OF_MEMORY);
	ctx_t *c = ctx_new(dev, flags, 0);
	if (c == NULL) FAIL(E_OUT_OF_MEMORY);
	tl_stack[tl_depth++] = c; // pushed: current on this thread
	*out = (H)c;
	END
}

EXPORT CUresult cuCtxCreate_v4(H *out, void *params, unsigned flags, int dev) {
	(void)params;
	return ctx_create("cuCtxCreate_v4", out, flags, dev);
}

EXPORT CUresult cuCtxCreate_v2(H *out, unsigned flags, int dev) { return ctx_create("cuCtxCreate_v2", out, flags, dev); }

EXPORT CUresult cuCtxDestroy_v2(H hc) {
	if (!strict()) { if (fast_current == hc) fast_current = 0; return OK; }
	inject_slow(DK_CONTEXT);
	BEGIN("cuCtxDestroy_v2");
	ctx_t *c;
	hdr *h = h_at(hc);
	if (h && h->type == H_CTX && h->dead) {
		violation(FN, "context %#lx destroyed twice", (unsigned long)hc);
		FAIL(E_CONTEXT_IS_DESTROYED);
	}
	TRY(get_h(FN, hc, H_CTX, (void **)&c));
	if (c->primary) {
		violation(FN, "cuCtxDestroy of primary context %#lx (release it instead)", (unsigned long)hc);
		FAIL(E_INVALID_CONTEXT);
	}
	int code = inject_fail(DK_CONTEXT);
	if (code) FAIL(code);
	WAIT_WHILE(c->pending > 0);
	ctx_wipe(c);
	h_kill(&c->h);
	ctx_pop_current(c);
	END
}

/* ---------- peer access ---------- */

// peer_index returns the index of p in c's peers (live or not), or -1.
static int peer_index(ctx_t *c, ctx_t *p) {
	for (int i = 0; i < c->npeers; i++)
		if (c->peers[i] == p) return i;
	return -1;
}

// cuCtxEnablePeerAccess lets the current context's kernels use the memory that p
// allocated with cuMemAlloc (pools have their own access: cuMemPoolSetAccess).
EXPORT CUresult cuCtxEnablePeerAccess(H hp, unsigned flags) {
	if (!strict()) return OK;
	BEGIN("cuCtxEnablePeerAccess");
	ctx_t *c, *p;
	TRY(need_ctx(FN, &c));
	TRY(get_h(FN, hp, H_CTX, (void **)&p));
	if (flags != 0) FAIL(E_INVALID_VALUE);
	if (!peer_ok(c->dev, p->dev)) FAIL(E_PEER_ACCESS_UNSUPPORTED);
	if (peer_index(c, p) >= 0) FAIL(E_PEER_ACCESS_ALREADY_ENABLED);
	if (c->npeers == c->cappeers) {
		int n = c->cappeers ? 2 * c->cappeers : 4;
		ctx_t **q = realloc(c->peers, (size_t)n * sizeof *q);
		if (q == NULL) FAIL(E_OUT_OF_MEMORY);
		c->peers = q;
		c->cappeers = n;
	}
	c->peers[c->npeers++] = p;
	END
}

EXPORT CUresult cuCtxDisablePeerAccess(H hp) {
	if (!strict()) return OK;
	BEGIN("cuCtxDisablePeerAccess");
	ctx_t *c, *p;
	TRY(need_ctx(FN, &c));
	TRY(get_h(FN, hp, H_CTX, (void **)&p));
	int i = peer_index(c, p);
	if (i < 0) FAIL(E_PEER_ACCESS_NOT_ENABLED);
	c->peers[i] = c->peers[--c->npeers];
	END
}

// peer_reaches reports whether a kernel of context c may use device memory m of
// another device: m's pool gives c's device access, or (memory of cuMemAlloc) c
// enabled peer access to m's context, which is still live.
static int peer_reaches(ctx_t *c, mem_t *m) {
	if (m->pool) return (m->pool->readable >> c->dev & 1) != 0;
	return m->ctx && !m->ctx->h.dead && peer_index(c, m->ctx) >= 0;
}

EXPORT CUresult cuCtxGetCurrent(H *out) {
	if (!strict()) { *out = fast_current; return OK; }
	if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return E_NOT_INITIALIZED;
	if (out == NULL) return E_INVALID_VALUE;
	*out = (H)cur_ctx(); // never a use, even of a destroyed context
	return OK;
}

// check_set validates a context about to become current, without the lock.
static CUresult check_set(const char *fn, H hc) {
	hdr *h = h_at(hc);
	if (h == NULL || h->type != H_CTX) {
		violation(fn, "invalid context handle %#lx", (unsigned long)hc);
		return E_INVALID_CONTEXT;
	}
	if (__atomic_load_n(&h->dead, __ATOMIC_ACQUIRE)) {
		violation(fn, "destroyed context %#lx made current", (unsigned long)hc);
		return E_CONTEXT_IS_DESTROYED;
	}
	return OK;
}

EXPORT CUresult cuCtxSetCurrent(H hc) {
	if (!strict()) { fast_current = hc; return OK; }
	if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return E_NOT_INITIALIZED;
	if (hc == 0) { // NULL pops the stack's top, as the driver documents
		if (tl_depth) tl_depth--;
		return OK;
	}
	CUresult r = check_set("cuCtxSetCurrent", hc);
	if (r != OK) return r;
	if (tl_depth == 0) tl_depth = 1;
	tl_stack[tl_depth - 1] = (ctx_t *)hc;
	return OK;
}

EXPORT CUresult cuCtxPushCurrent_v2(H hc) {
	if (!strict()) { fast_current = hc; return OK; }
	if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return E_NOT_INITIALIZED;
	CUresult r = check_set("cuCtxPushCurrent_v2", hc);
	if (r != OK) return r;
	if (tl_depth == CTX_STACK) return E_OUT_OF_MEMORY;
	tl_stack[tl_depth++] = (ctx_t *)hc;
	return OK;
}

EXPORT CUresult cuCtxPopCurrent_v2(H *out) {
	if (!strict()) { if (out) *out = fast_current; fast_current = 0; return OK; }
	if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return E_NOT_INITIALIZED;
	if (tl_depth == 0) return E_INVALID_CONTEXT;
	ctx_t *c = tl_stack[--tl_depth];
	if (out) *out = (H)c;
	return OK;
}

EXPORT CUresult cuCtxGetDevice(int *dev) {
	if (!strict()) { *dev = 0; return OK; }
	BEGIN("cuCtxGetDevice");
	ctx_t *c;
	if (dev == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	*dev = c->dev;
	END
}

EXPORT CUresult cuCtxGetFlags(unsigned *flags) {
	if (!strict()) { *flags = 0; return OK; }
	BEGIN("cuCtxGetFlags");
	ctx_t *c;
	if (flags == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	*flags = c->flags;
	END
}

EXPORT CUresult cuCtxGetApiVersion(H hc, unsigned *v) {
	(void)hc;
	if (v == NULL) return E_INVALID_VALUE;
	*v = 13000;
	return OK;
}

EXPORT CUresult cuCtxGetId(H hc, unsigned long long *id) {
	if (!strict()) { *id = hc; return OK; }
	BEGIN("cuCtxGetId");
	ctx_t *c;
	if (id == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hc, H_CTX, (void **)&c));
	*id = c->h.id;
	END
}

EXPORT CUresult cuCtxSynchronize(void) {
	if (!strict()) return OK;
	BEGIN("cuCtxSynchronize");
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	WAIT_WHILE(c->pending > 0);
	STICKY_AFTER_WAIT;
	END
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
	if (!strict()) { if (least) *least = 0; if (greatest) *greatest = -5; return OK; }
	BEGIN("cuCtxGetStreamPriorityRange");
	if (least) *least = 0;
	if (greatest) *greatest = -5;
	END
}

EXPORT CUresult cuCtxSetLimit(int limit, size_t v) { (void)limit; (void)v; return OK; }
EXPORT CUresult cuCtxGetLimit(size_t *v, int limit) {
	(void)limit;
	if (v == NULL) return E_INVALID_VALUE;
	*v = 1024;
	return OK;
}
EXPORT CUresult cuCtxSetCacheConfig(int cfg) { (void)cfg; return OK; }
EXPORT CUresult cuCtxGetCacheConfig(int *cfg) { if (cfg) *cfg = 0; return OK; }

/* ---------- streams ---------- */

static CUresult stream_create(const char *FN, H *out, unsigned flags, int prio) {
	CUresult r = OK;
	ctx_t *c;
	if (out == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return E_INVALID_VALUE;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	stream_t *s = h_new(H_STREAM, c);
	if (s == NULL) return E_OUT_OF_MEMORY;
	s->flags = flags;
	s->prio = prio > 0 ? 0 : prio < -5 ? -5 : prio; // clamped, as the driver does
	s->active = -1;
	*out = (H)s;
	return OK;
}

EXPORT CUresult cuStreamCreate(H *out, unsigned flags) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuStreamCreate");
	r = stream_create(FN, out, flags, 0);
	END
}

EXPORT CUresult cuStreamCreateWithPriority(H *out, unsigned flags, int prio) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuStreamCreateWithPriority");
	r = stream_create(FN, out, flags, prio);
	END
}

EXPORT CUresult cuStreamDestroy_v2(H hs) {
	if (!strict()) return OK;
	inject_slow(DK_STREAM);
	BEGIN("cuStreamDestroy_v2");
	stream_t *s;
	ctx_t *c;
	hdr *h = h_at(hs);
	if (h && h->type == H_STREAM && h->dead) {
		violation(FN, "stream %#lx destroyed twice", (unsigned long)hs);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(need_ctx(FN, &c));
	if (hs == 0 || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD) {
		violation(FN, "destroy of the default stream %#lx", (unsigned long)hs);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, hs, H_STREAM, (void **)&s));
	int code = inject_fail(DK_STREAM);
	if (code) FAIL(code);
	h_kill(&s->h); // its queued work still runs
	END
}

EXPORT CUresult cuStreamQuery(H hs) {
	if (!strict()) return OK;
	BEGIN("cuStreamQuery");
	stream_t *s;
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	if (s == LEGACY) FAIL(c->bpending ? E_NOT_READY : OK);
	if (s->capture) {
		s->capture_invalid = 1;
		FAIL(E_STREAM_CAPTURE_UNSUPPORTED);
	}
	if (s->done < s->enq) r = E_NOT_READY;
	STICKY_AFTER_WAIT;
	END
}

EXPORT CUresult cuStreamSynchronize(H hs) {
	if (!strict()) return OK;
	BEGIN("cuStreamSynchronize");
	stream_t *s;
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	if (s == LEGACY) {
		WAIT_WHILE(c->bpending > 0);
		goto out;
	}
	if (s->capture) {
		s->capture_invalid = 1;
		FAIL(E_STREAM_CAPTURE_UNSUPPORTED);
	}
	wait_stream(s);
	STICKY_AFTER_WAIT;
	END
}

EXPORT CUresult cuStreamWaitEvent(H hs, H he, unsigned flags) {
	(void)flags;
	if (!strict()) return OK;
	BEGIN("cuStreamWaitEvent");
	stream_t *s;
	event_t *e;
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	TRY(get_h(FN, he, H_EVENT, (void **)&e));
	if (e->ipc_src) e = e->ipc_src;
	op_t *o = op_new(OP_WAIT, FN);
	o->u.ev.e = e;
	submit(c, s, o);
	END
}

EXPORT CUresult cuStreamGetPriority(H hs, int *prio) {
	if (!strict()) { *prio = 0; return OK; }
	BEGIN("cuStreamGetPriority");
	stream_t *s;
	if (prio == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	*prio = s ? s->prio : 0;
	END
}

EXPORT CUresult cuStreamGetFlags(H hs, unsigned *flags) {
	if (!strict()) { *flags = 0; return OK; }
	BEGIN("cuStreamGetFlags");
	stream_t *s;
	if (flags == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	*flags = s ? s->flags : 0;
	END
}

EXPORT CUresult cuStreamGetCtx(H hs, H *out) {
	if (!strict()) { *out = fast_current; return OK; }
	BEGIN("cuStreamGetCtx");
	stream_t *s;
	ctx_t *c;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	if (s == LEGACY) {
		TRY(need_ctx(FN, &c));
		*out = (H)c;
	} else {
		*out = (H)s->h.ctx;
	}
	END
}

EXPORT CUresult cuStreamGetId(H hs, unsigned long long *id) {
	if (!strict()) { *id = hs; return OK; }
	BEGIN("cuStreamGetId");
	stream_t *s;
	if (id == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	*id = s ? s->h.id : hs;
	END
}

EXPORT CUresult cuLaunchHostFunc(H hs, void (*fn)(void *), void *arg) {
	if (!strict()) { if (fn) fn(arg); return OK; }
	BEGIN("cuLaunchHostFunc");
	stream_t *s;
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	if (fn == NULL) FAIL(E_INVALID_VALUE);
	op_t *o = op_new(OP_HOSTFN, FN);
	o->u.hf.fn = fn;
	o->u.hf.arg = arg;
	submit(c, s, o);
	END
}

/* ---------- events ---------- */

EXPORT CUresult cuEventCreate(H *out, unsigned flags) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuEventCreate");
	ctx_t *c;
	if (out == NULL || (flags & ~7u)) FAIL(E_INVALID_VALUE);
	if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	event_t *e = h_new(H_EVENT, c);
	if (e == NULL) FAIL(E_OUT_OF_MEMORY);
	e->flags = flags;
	*out = (H)e;
	END
}

EXPORT CUresult cuEventDestroy_v2(H he) {
	if (!strict()) return OK;
	inject_slow(DK_EVENT);
	BEGIN("cuEventDestroy_v2");
	event_t *e;
	hdr *h = h_at(he);
	if (h && h->type == H_EVENT && h->dead) {
		violation(FN, "event %#lx destroyed twice", (unsigned long)he);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, he, H_EVENT, (void **)&e));
	int code = inject_fail(DK_EVENT);
	if (code) FAIL(code);
	h_kill(&e->h); // records and waits already queued still complete
	END
}

static CUresult event_record(const char *FN, H he, H hs) {
	CUresult r;
	stream_t *s;
	event_t *e;
	ctx_t *c;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	if ((r = get_h(FN, he, H_EVENT, (void **)&e)) != OK) return r;
	if ((r = get_stream(FN, hs, &s)) != OK) return r;
	ctx_t *sc = s ? s->h.ctx : c;
	if (e->h.ctx != sc) { // the driver: event and stream must belong to one context
		violation(FN, "event %#lx of context %#lx recorded on stream %#lx of context %#lx", (unsigned long)he,
			(unsigned long)(uintptr_t)e->h.ctx, (unsigned long)hs, (unsigned long)(uintptr_t)sc);
		return E_INVALID_HANDLE;
	}
	op_t *o = op_new(OP_RECORD, FN);
	o->u.ev.e = e;
	submit(c, s, o);
	return OK;
}

EXPORT CUresult cuEventRecord(H he, H hs) {
	if (!strict()) return OK;
	BEGIN("cuEventRecord");
	r = event_record(FN, he, hs);
	END
}

EXPORT CUresult cuEventRecordWithFlags(H he, H hs, unsigned flags) {
	(void)flags;
	if (!strict()) return OK;
	BEGIN("cuEventRecordWithFlags");
	r = event_record(FN, he, hs);
	END
}

EXPORT CUresult cuEventQuery(H he) {
	if (!strict()) return OK;
	BEGIN("cuEventQuery");
	event_t *e;
	TRY(get_h(FN, he, H_EVENT, (void **)&e));
	if (e->ipc_src) e = e->ipc_src;
	if (!ev_ran(e, e->enq)) r = E_NOT_READY;
	STICKY_AFTER_WAIT;
	END
}

EXPORT CUresult cuEventSynchronize(H he) {
	if (!strict()) return OK;
	BEGIN("cuEventSynchronize");
	event_t *e;
	TRY(get_h(FN, he, H_EVENT, (void **)&e));
	if (e->ipc_src) e = e->ipc_src;
	uint64_t t = e->enq;
	WAIT_WHILE(!ev_ran(e, t));
	STICKY_AFTER_WAIT;
	END
}

// event_elapsed is cuEventElapsedTime_v2 and cuEventElapsedTime, the entry point that
// older drivers have instead (the same signature).
static CUresult event_elapsed(const char *FN, float *ms, H ha, H hb) {
	if (!strict()) { *ms = 0; return OK; }
	BEGIN_AS_FN
	event_t *a, *b;
	if (ms == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, ha, H_EVENT, (void **)&a));
	TRY(get_h(FN, hb, H_EVENT, (void **)&b));
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) FAIL(E_INVALID_HANDLE);
	if (a->enq == 0 || b->enq == 0) FAIL(E_INVALID_HANDLE); // never recorded
	if (!ev_ran(a, a->enq) || !ev_ran(b, b->enq)) FAIL(E_NOT_READY);
	*ms = (float)((double)((int64_t)b->ts - (int64_t)a->ts) / 1e6);
	END
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, H ha, H hb) { return event_elapsed("cuEventElapsedTime_v2", ms, ha, hb); }

EXPORT CUresult cuEventElapsedTime(float *ms, H ha, H hb) { return event_elapsed("cuEventElapsedTime", ms, ha, hb); }

/* ---------- memory ---------- */

// Which freeing function an allocation needs.
static CUresult check_free(const char *FN, CUdeviceptr p, int api, mem_t **out) {
	mem_t *m = mem_find((uintptr_t)p);
	*out = NULL;
	if (m == NULL) {
		reg_t *g = reg_find((uintptr_t)p);
		if (g) violation(FN, "free of registered host memory %#llx (unregister it instead)", p);
		else violation(FN, "free of %#llx, which was never allocated", p);
		return E_INVALID_VALUE;
	}
	if (m->r.state != ST_LIVE) {
		violation(FN, "double free of %s allocation %#lx (%s)", mkname[m->kind], (unsigned long)m->base, stname[m->r.state]);
		return E_INVALID_VALUE;
	}
	if (m->base != p) {
		violation(FN, "free of %#llx, inside the %s allocation [%#lx, +%zu) but not its start", p, mkname[m->kind],
			(unsigned long)m->base, m->size);
		return E_INVALID_VALUE;
	}
	if (m->api != api) {
		violation(FN, "free of a %s allocation %#llx with the wrong function", mkname[m->kind], p);
		return E_INVALID_VALUE;
	}
	*out = m;
	return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (!strict()) { *p = fast_ptr(n); return OK; }
	BEGIN("cuMemAlloc_v2");
	ctx_t *c;
	mem_t *m;
	if (p == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(mem_alloc(c, c->dev, MK_DEVICE, API_ALLOC, NULL, n, AK_DEVICE, &m));
	*p = m->base;
	END
}

// cuMemFree_v2 waits for the context's work first, as the driver does.
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	if (!strict()) return OK;
	inject_slow(DK_MEMFREE);
	BEGIN("cuMemFree_v2");
	ctx_t *c;
	mem_t *m;
	TRY(need_ctx(FN, &c));
	if (p == 0) goto out;
	TRY(check_free(FN, p, API_ALLOC, &m));
	int code = inject_fail(DK_MEMFREE);
	if (code) FAIL(code);
	m->r.state = ST_FREE_PENDING; // named by nothing else from now on
	free_pending_n++;
	if (m->ctx && !m->ctx->h.dead) WAIT_WHILE(m->ctx->pending > 0);
	mem_release(m);
	END
}

static CUresult host_alloc(const char *FN, void **pp, size_t n) {
	CUresult r;
	ctx_t *c;
	mem_t *m;
	if (pp == NULL) return E_INVALID_VALUE;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	if ((r = mem_alloc(c, c->dev, MK_HOST, API_HOST, NULL, n, AK_HOST, &m)) != OK) return r;
	*pp = (void *)m->base;
	return OK;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t n) {
	if (!strict()) { *pp = calloc(1, n ? n : 1); return *pp ? OK : E_OUT_OF_MEMORY; }
	BEGIN("cuMemAllocHost_v2");
	r = host_alloc(FN, pp, n);
	END
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
	if (!strict()) { *pp = calloc(1, n ? n : 1); return *pp ? OK : E_OUT_OF_MEMORY; }
	BEGIN("cuMemHostAlloc");
	if (flags & ~7u) FAIL(E_INVALID_VALUE);
	r = host_alloc(FN, pp, n);
	END
}

EXPORT CUresult cuMemFreeHost(void *p) {
	if (!strict()) { free(p); return OK; }
	inject_slow(DK_MEMFREE);
	BEGIN("cuMemFreeHost");
	ctx_t *c;
	mem_t *m;
	TRY(need_ctx(FN, &c));
	TRY(check_free(FN, (CUdeviceptr)(uintptr_t)p, API_HOST, &m));
	int code = inject_fail(DK_MEMFREE);
	if (code) FAIL(code);
	m->r.state = ST_FREE_PENDING;
	free_pending_n++;
	if (m->ctx && !m->ctx->h.dead) WAIT_WHILE(m->ctx->pending > 0);
	mem_release(m);
	END
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
	if (!strict()) {
		void *h = calloc(1, n ? n : 1);
		if (h == NULL) return E_OUT_OF_MEMORY;
		*p = (CUdeviceptr)(uintptr_t)h;
		return OK;
	}
	BEGIN("cuMemAllocManaged");
	ctx_t *c;
	mem_t *m;
	if (p == NULL || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(mem_alloc(c, c->dev, MK_MANAGED, API_ALLOC, NULL, n, AK_MANAGED, &m));
	*p = m->base;
	END
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
	if (!strict()) { *total = capacity[0]; *freeb = capacity[0]; return OK; }
	BEGIN("cuMemGetInfo_v2");
	ctx_t *c;
	if (freeb == NULL || total == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	*total = capacity[c->dev];
	*freeb = dev_used[c->dev] >= capacity[c->dev] ? 0 : capacity[c->dev] - dev_used[c->dev];
	END
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
	if (!strict()) { if (base) *base = p; if (size) *size = 0; return OK; }
	BEGIN("cuMemGetAddressRange_v2");
	ctx_t *c;
	TRY(need_ctx(FN, &c));
	mem_t *m = mem_find((uintptr_t)p);
	if (m == NULL || p - m->base >= m->size) FAIL(E_NOT_FOUND);
	if (m->r.state != ST_LIVE) {
		violation(FN, "use of freed memory %#llx (%s)", p, stname[m->r.state]);
		FAIL(E_INVALID_VALUE);
	}
	if (base) *base = m->base;
	if (size) *size = m->size;
	END
}

/* ---------- registered host memory ---------- */

EXPORT CUresult cuMemHostRegister_v2(void *hp, size_t n, unsigned flags) {
	if (!strict()) return OK;
	BEGIN("cuMemHostRegister_v2");
	ctx_t *c;
	uintptr_t p = (uintptr_t)hp;
	if (hp == NULL || n == 0 || (flags & ~15u) || p + n < p) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	if (mem_find(p) || mem_find(p + n - 1)) FAIL(E_HOST_MEMORY_ALREADY_REGISTERED); // pinned already
	// Overlapping live registrations refuse it; overlapping ended ones are
	// forgotten (Go reuses memory: the range is registered again).
	size_t first = regs_first(p), end = first;
	for (; end < nregs && regs[end]->base < p + n; end++)
		if (regs[end]->r.state == ST_LIVE) FAIL(E_HOST_MEMORY_ALREADY_REGISTERED);
	if (end > first) {
		memmove(regs + first, regs + end, (nregs - end) * sizeof *regs);
		nregs -= end - first;
	}
	reg_t *g = calloc(1, sizeof *g);
	if (g == NULL) abort();
	g->r.state = ST_LIVE;
	g->r.is_reg = 1;
	g->ctx = c;
	g->base = p;
	g->size = n;
	g->flags = flags;
	g->cnext = c->regs;
	c->regs = g;
	regs_insert(g);
	regs_live++;
	END
}

EXPORT CUresult cuMemHostUnregister(void *hp) {
	if (!strict()) return OK;
	inject_slow(DK_HOSTUNREG);
	BEGIN("cuMemHostUnregister");
	ctx_t *c;
	uintptr_t p = (uintptr_t)hp;
	TRY(need_ctx(FN, &c));
	reg_t *g = reg_find(p);
	if (g == NULL || g->base != p) FAIL(E_HOST_MEMORY_NOT_REGISTERED);
	if (g->r.state != ST_LIVE) {
		if (g->by_api) violation(FN, "host memory %#lx unregistered twice", (unsigned long)p);
		FAIL(E_HOST_MEMORY_NOT_REGISTERED);
	}
	int code = inject_fail(DK_HOSTUNREG);
	if (code) FAIL(code);
	g->r.state = ST_UNREG; // kept, so that later device use of the range is caught
	g->by_api = 1;
	regs_live--;
	regs_ended++;
	END
}

// With unified addressing the device address of pinned or registered host memory is
// the host address itself.
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *hp, unsigned flags) {
	if (!strict()) { *d = (CUdeviceptr)(uintptr_t)hp; return OK; }
	BEGIN("cuMemHostGetDevicePointer_v2");
	ctx_t *c;
	uintptr_t p = (uintptr_t)hp;
	if (d == NULL || flags != 0) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	mem_t *m = mem_find(p);
	reg_t *g = reg_find(p);
	if (m && m->kind == MK_HOST && m->r.state == ST_LIVE && p - m->base < m->size) {
		*d = p;
	} else if (g && g->r.state == ST_LIVE) {
		*d = p;
	} else {
		if (m && m->r.state != ST_LIVE) violation(FN, "use of freed memory %#lx (%s)", (unsigned long)p, stname[m->r.state]);
		else if (g) violation(FN, "use of unregistered host memory %#lx", (unsigned long)p);
		FAIL(E_INVALID_VALUE);
	}
	END
}

EXPORT CUresult cuMemHostGetFlags(unsigned *flags, void *hp) {
	if (!strict()) { *flags = 0; return OK; }
	BEGIN("cuMemHostGetFlags");
	uintptr_t p = (uintptr_t)hp;
	if (flags == NULL) FAIL(E_INVALID_VALUE);
	mem_t *m = mem_find(p);
	reg_t *g = reg_find(p);
	if (m && m->kind == MK_HOST && m->r.state == ST_LIVE) *flags = 2; // DEVICEMAP
	else if (g && g->r.state == ST_LIVE) *flags = g->flags;
	else FAIL(E_INVALID_VALUE);
	END
}

/* ---------- stream-ordered memory pools ---------- */

static pool_t *pool_new(ctx_t *c, int dev, int kind) {
	pool_t *p = h_new(H_POOL, c);
	if (p == NULL) return NULL;
	p->dev = dev;
	p->kind = kind;
	p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
	if (kind == MK_DEVICE) p->readable = p->writable = 1ull << dev;
	if (kind == MK_MANAGED) p->readable = p->writable = ~0ull;
	p->host_access = kind == MK_DEVICE ? CU_MEM_ACCESS_FLAGS_PROT_NONE : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return p;
}

static pool_t *default_pool(int dev) {
	if (def_pool[dev] == NULL) {
		def_pool[dev] = pool_new(NULL, dev, MK_DEVICE);
		if (def_pool[dev]) def_pool[dev]->is_default = 1;
	}
	if (cur_pool[dev] == NULL) cur_pool[dev] = def_pool[dev];
	return def_pool[dev];
}

EXPORT CUresult cuDeviceGetDefaultMemPool(H *out, int dev) {
	if (!strict()) { *out = 0xd00d; return OK; }
	BEGIN("cuDeviceGetDefaultMemPool");
	if (out == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	pool_t *p = default_pool(dev);
	if (p == NULL) FAIL(E_OUT_OF_MEMORY);
	*out = (H)p;
	END
}

EXPORT CUresult cuDeviceGetMemPool(H *out, int dev) {
	if (!strict()) { *out = 0xd00d; return OK; }
	BEGIN("cuDeviceGetMemPool");
	if (out == NULL) FAIL(E_INVALID_VALUE);
	CHECK_DEV(dev);
	if (default_pool(dev) == NULL) FAIL(E_OUT_OF_MEMORY);
	*out = (H)cur_pool[dev];
	END
}

EXPORT CUresult cuDeviceSetMemPool(int dev, H hp) {
	if (!strict()) return OK;
	BEGIN("cuDeviceSetMemPool");
	pool_t *p;
	CHECK_DEV(dev);
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (p->kind != MK_DEVICE || p->dev != dev) FAIL(E_INVALID_VALUE);
	default_pool(dev);
	cur_pool[dev] = p;
	END
}

EXPORT CUresult cuMemPoolCreate(H *out, const CUmemPoolProps *props) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuMemPoolCreate");
	ctx_t *c;
	if (out == NULL || props == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	int kind, dev = c->dev, lt = props->location.type, id = props->location.id;
#if FAKECUDA_DRIVER_VERSION < 12000
	// The 11.x enums have pinned memory on a device only: host and managed pools
	// are values an older driver does not know.
	if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || lt != CU_MEM_LOCATION_TYPE_DEVICE) FAIL(E_INVALID_VALUE);
#endif
	if (props->allocType == CU_MEM_ALLOCATION_TYPE_PINNED) {
		if (lt == CU_MEM_LOCATION_TYPE_DEVICE) {
			if (id < 0 || id >= ndev) FAIL(E_INVALID_VALUE);
			kind = MK_DEVICE;
			dev = id;
		} else if (lt == CU_MEM_LOCATION_TYPE_HOST || lt == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
			lt == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
			kind = MK_HOST;
		} else {
			FAIL(E_INVALID_VALUE);
		}
	} else if (props->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED) {
		if (lt == CU_MEM_LOCATION_TYPE_DEVICE) {
			if (id < 0 || id >= ndev) FAIL(E_INVALID_VALUE);
			dev = id;
		} else if (lt != CU_MEM_LOCATION_TYPE_NONE && lt != CU_MEM_LOCATION_TYPE_HOST) {
			FAIL(E_INVALID_VALUE);
		}
		kind = MK_MANAGED;
	} else {
		FAIL(E_INVALID_VALUE);
	}
	if (props->handleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) FAIL(E_NOT_SUPPORTED);
	if (props->handleTypes && kind != MK_DEVICE) FAIL(E_INVALID_VALUE);
	pool_t *p = pool_new(c, dev, kind);
	if (p == NULL) FAIL(E_OUT_OF_MEMORY);
	p->ipc_fd = props->handleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	*out = (H)p;
	END
}

// A pool with live allocations may be destroyed: the driver releases it once they
// are freed, and they stay valid until then.
EXPORT CUresult cuMemPoolDestroy(H hp) {
	if (!strict()) return OK;
	inject_slow(DK_POOL);
	BEGIN("cuMemPoolDestroy");
	pool_t *p;
	hdr *h = h_at(hp);
	if (h && h->type == H_POOL && h->dead) {
		violation(FN, "memory pool %#lx destroyed twice", (unsigned long)hp);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (p->is_default) {
		violation(FN, "destroy of device %d's default memory pool", p->dev);
		FAIL(E_INVALID_VALUE);
	}
	int code = inject_fail(DK_POOL);
	if (code) FAIL(code);
	if (cur_pool[p->dev] == p) cur_pool[p->dev] = def_pool[p->dev];
	h_kill(&p->h);
	END
}

EXPORT CUresult cuMemPoolSetAttribute(H hp, int attr, void *v) {
	if (!strict()) return OK;
	BEGIN("cuMemPoolSetAttribute");
	pool_t *p;
	if (v == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	switch (attr) {
	case 1: case 2: case 3: p->reuse[attr] = *(int *)v != 0; break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(uint64_t *)v; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: // only 0, which resets the watermark
		if (*(uint64_t *)v != 0) FAIL(E_INVALID_VALUE);
		p->reserved_high = p->used;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(uint64_t *)v != 0) FAIL(E_INVALID_VALUE);
		p->used_high = p->used;
		break;
	default: FAIL(E_INVALID_VALUE);
	}
	END
}

// Reserved memory is the used memory: the fake keeps nothing cached in its pools.
EXPORT CUresult cuMemPoolGetAttribute(H hp, int attr, void *v) {
	if (!strict()) { *(uint64_t *)v = 0; return OK; }
	BEGIN("cuMemPoolGetAttribute");
	pool_t *p;
	if (v == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	switch (attr) {
	case 1: case 2: case 3: *(int *)v = p->reuse[attr]; break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(uint64_t *)v = p->threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(uint64_t *)v = p->used; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(uint64_t *)v = p->reserved_high; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(uint64_t *)v = p->used; break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(uint64_t *)v = p->used_high; break;
	default: FAIL(E_INVALID_VALUE);
	}
	END
}

EXPORT CUresult cuMemPoolTrimTo(H hp, size_t keep) {
	(void)keep;
	if (!strict()) return OK;
	BEGIN("cuMemPoolTrimTo");
	pool_t *p;
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	END
}

EXPORT CUresult cuMemPoolSetAccess(H hp, const CUmemAccessDesc *d, size_t n) {
	if (!strict()) return OK;
	BEGIN("cuMemPoolSetAccess");
	pool_t *p;
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (n > 0 && d == NULL) FAIL(E_INVALID_VALUE);
	for (size_t i = 0; i < n; i++) { // all valid, or nothing changes
		int f = d[i].flags;
		if (d[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d[i].location.id < 0 || d[i].location.id >= ndev) FAIL(E_INVALID_VALUE);
		if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) FAIL(E_INVALID_VALUE);
		if (p->kind == MK_DEVICE && d[i].location.id == p->dev && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) FAIL(E_INVALID_VALUE);
		// Another device reaches a device pool over peer access only.
		if (p->kind == MK_DEVICE && d[i].location.id != p->dev && f != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
			!peer_ok(p->dev, d[i].location.id))
			FAIL(E_INVALID_DEVICE);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t bit = 1ull << d[i].location.id;
		p->readable = d[i].flags & CU_MEM_ACCESS_FLAGS_PROT_READ ? p->readable | bit : p->readable & ~bit;
		p->writable = d[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? p->writable | bit : p->writable & ~bit;
	}
	END
}

EXPORT CUresult cuMemPoolGetAccess(int *flags, H hp, const CUmemLocation *loc) {
	if (!strict()) { *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; return OK; }
	BEGIN("cuMemPoolGetAccess");
	pool_t *p;
	if (flags == NULL || loc == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (loc->type == CU_MEM_LOCATION_TYPE_DEVICE) {
		if (loc->id < 0 || loc->id >= ndev) FAIL(E_INVALID_VALUE);
		uint64_t bit = 1ull << loc->id;
		*flags = p->writable & bit ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : p->readable & bit ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	} else if (loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
		*flags = p->host_access;
	} else {
		FAIL(E_INVALID_VALUE);
	}
	END
}

static CUresult alloc_async(const char *FN, CUdeviceptr *out, size_t n, pool_t *p, H hs) {
	CUresult r;
	ctx_t *c;
	stream_t *s;
	mem_t *m;
	if (out == NULL) return E_INVALID_VALUE;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	if ((r = get_stream(FN, hs, &s)) != OK) return r;
	if (s && s->capture) { // graph allocation nodes are not implemented
		s->capture_invalid = 1;
		return E_NOT_SUPPORTED;
	}
	if (p == NULL && (p = default_pool(c->dev)) != NULL) p = cur_pool[c->dev];
	if (p == NULL) return E_OUT_OF_MEMORY;
	if ((r = mem_alloc(c, p->dev, p->kind, API_ALLOC, p, n, AK_POOL, &m)) != OK) return r;
	*out = m->base; // usable at once
	return OK;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, H hs) {
	if (!strict()) { *p = fast_ptr(n); return OK; }
	BEGIN("cuMemAllocAsync");
	r = alloc_async(FN, p, n, NULL, hs);
	END
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, H hp, H hs) {
	if (!strict()) { *p = fast_ptr(n); return OK; }
	BEGIN("cuMemAllocFromPoolAsync");
	pool_t *pool;
	TRY(get_h(FN, hp, H_POOL, (void **)&pool));
	r = alloc_async(FN, p, n, pool, hs);
	END
}

// cuMemFreeAsync marks p free-pending at once: naming it in any later call is a
// violation. The free itself runs in s's order.
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, H hs) {
	if (!strict()) return OK;
	inject_slow(DK_MEMFREE);
	BEGIN("cuMemFreeAsync");
	ctx_t *c;
	stream_t *s;
	mem_t *m;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	if (p == 0) goto out;
	TRY(check_free(FN, p, API_ALLOC, &m));
	if (s && s->capture) {
		s->capture_invalid = 1;
		FAIL(E_NOT_SUPPORTED);
	}
	int code = inject_fail(DK_MEMFREE);
	if (code) FAIL(code);
	m->r.state = ST_FREE_PENDING;
	free_pending_n++;
	op_t *o = op_new(OP_FREE, FN);
	o->u.fr.m = m;
	submit(c, s, o);
	END
}

/* ---------- copies and memsets ---------- */

// copy checks and queues (or runs) a copy of n bytes from src to dst. dst_use and
// src_use say how the API names each side. Pageable host memory is read when the
// call is made (a staging copy) and written only once the stream's earlier work is
// done, before the call returns; other memory is copied when the operation runs.
static CUresult copy(const char *FN, uintptr_t dst, int dst_use, uintptr_t src, int src_use, size_t n, H hs, int async) {
	CUresult r;
	ctx_t *c;
	stream_t *s = LEGACY;
	rng_t *dref, *sref;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	if (async && (r = get_stream(FN, hs, &s)) != OK) return r;
	if (n == 0) return OK;
	if ((r = check_range(FN, "destination", dst, n, dst_use, &dref)) != OK) return r;
	if ((r = check_range(FN, "source", src, n, src_use, &sref)) != OK) return r;
	op_t *o = op_new(OP_COPY, FN);
	o->u.cp.dst = (char *)dst;
	o->u.cp.src = (const char *)src;
	o->u.cp.n = n;
	op_ref(o, dref);
	op_ref(o, sref);
	if (s != LEGACY && !s->capture) {
		if (dref == NULL) { // to pageable memory: done before returning
			wait_stream(s);
			o->s = s;
			exec_op(o);
			ops_executed++;
			op_free(o);
			return OK;
		}
		if (sref == NULL) { // from pageable memory: read now
			o->u.cp.staging = malloc(n);
			if (o->u.cp.staging == NULL) {
				op_free(o);
				return E_OUT_OF_MEMORY;
			}
			memcpy(o->u.cp.staging, (const void *)src, n);
		}
	}
	submit(c, s, o);
	return OK;
}

#define COPY(name, dst, du, src, su, n, hs, async) \
	BEGIN(name); \
	r = copy(FN, (uintptr_t)(dst), du, (uintptr_t)(src), su, n, hs, async); \
	END

EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
	if (!strict()) return OK;
	COPY("cuMemcpy", d, USE_HOST, s, USE_HOST, n, 0, 0)
}
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, H st) {
	if (!strict()) return OK;
	COPY("cuMemcpyAsync", d, USE_HOST, s, USE_HOST, n, st, 1)
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
	if (!strict()) return OK;
	COPY("cuMemcpyHtoD_v2", d, USE_DEVICE, s, USE_HOST, n, 0, 0)
}
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
	if (!strict()) { memset(d, 0, n); return OK; }
	COPY("cuMemcpyDtoH_v2", d, USE_HOST, s, USE_DEVICE, n, 0, 0)
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
	if (!strict()) return OK;
	COPY("cuMemcpyDtoD_v2", d, USE_DEVICE, s, USE_DEVICE, n, 0, 0)
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, H st) {
	if (!strict()) return OK;
	COPY("cuMemcpyHtoDAsync_v2", d, USE_DEVICE, s, USE_HOST, n, st, 1)
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, H st) {
	if (!strict()) return OK;
	COPY("cuMemcpyDtoHAsync_v2", d, USE_HOST, s, USE_DEVICE, n, st, 1)
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, H st) {
	if (!strict()) return OK;
	COPY("cuMemcpyDtoDAsync_v2", d, USE_DEVICE, s, USE_DEVICE, n, st, 1)
}
// The peer copies name both contexts, which must be live; no peer access is needed
// (the driver stages the copy where the devices cannot reach each other).
EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, H dc, CUdeviceptr s, H sc, size_t n) {
	if (!strict()) return OK;
	BEGIN("cuMemcpyPeer");
	void *x;
	TRY(get_h(FN, dc, H_CTX, &x));
	TRY(get_h(FN, sc, H_CTX, &x));
	r = copy(FN, (uintptr_t)d, USE_DEVICE, (uintptr_t)s, USE_DEVICE, n, 0, 0);
	END
}
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, H dc, CUdeviceptr s, H sc, size_t n, H st) {
	if (!strict()) return OK;
	BEGIN("cuMemcpyPeerAsync");
	void *x;
	TRY(get_h(FN, dc, H_CTX, &x));
	TRY(get_h(FN, sc, H_CTX, &x));
	r = copy(FN, (uintptr_t)d, USE_DEVICE, (uintptr_t)s, USE_DEVICE, n, st, 1);
	END
}

static CUresult memset_op(const char *FN, CUdeviceptr d, uint32_t v, size_t count, int elem, H hs, int async) {
	CUresult r;
	ctx_t *c;
	stream_t *s = LEGACY;
	rng_t *ref;
	if ((r = need_ctx(FN, &c)) != OK) return r;
	if (async && (r = get_stream(FN, hs, &s)) != OK) return r;
	if (count == 0) return OK;
	if (d % (unsigned)elem) return E_INVALID_VALUE; // misaligned for 16/32-bit values
	if (count > SIZE_MAX / (unsigned)elem) return E_INVALID_VALUE;
	if ((r = check_range(FN, "destination", (uintptr_t)d, count * (size_t)elem, USE_DEVICE, &ref)) != OK) return r;
	op_t *o = op_new(OP_MEMSET, FN);
	o->u.ms.dst = (char *)(uintptr_t)d;
	o->u.ms.val = v;
	o->u.ms.count = count;
	o->u.ms.elem = elem;
	o->u.ms.rows = 1;
	op_ref(o, ref);
	submit(c, s, o);
	return OK;
}

#define MEMSET(name, d, v, count, elem, hs, async) \
	BEGIN(name); \
	r = memset_op(FN, d, v, count, elem, hs, async); \
	END

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD8_v2", d, v, n, 1, 0, 0)
}
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD16_v2", d, v, n, 2, 0, 0)
}
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD32_v2", d, v, n, 4, 0, 0)
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, H s) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD8Async", d, v, n, 1, s, 1)
}
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, H s) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD16Async", d, v, n, 2, s, 1)
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, H s) {
	if (!strict()) return OK;
	MEMSET("cuMemsetD32Async", d, v, n, 4, s, 1)
}

// cuStreamWriteValue32_v2 is a one-word memset queued on the stream (the fast mode
// writes at once: its work is done when queued).
EXPORT CUresult cuStreamWriteValue32_v2(H s, CUdeviceptr d, uint32_t v, unsigned flags) {
	if (!strict()) { __atomic_store_n((uint32_t *)(uintptr_t)d, v, __ATOMIC_RELEASE); return OK; }
	BEGIN("cuStreamWriteValue32_v2");
	if (flags & ~1u) FAIL(E_INVALID_VALUE); // CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER
	r = memset_op(FN, d, v, 1, 4, s, 1);
	END
}

// Managed-memory hints: checked, then nothing to do.
EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, H hs) {
	(void)loc; (void)flags;
	if (!strict()) return OK;
	BEGIN("cuMemPrefetchAsync_v2");
	ctx_t *c;
	stream_t *s;
	rng_t *ref;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	TRY(check_range(FN, "range", (uintptr_t)p, n, USE_DEVICE, &ref));
	END
}

EXPORT CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, int advice, CUmemLocation loc) {
	(void)advice; (void)loc;
	if (!strict()) return OK;
	BEGIN("cuMemAdvise_v2");
	ctx_t *c;
	rng_t *ref;
	TRY(need_ctx(FN, &c));
	TRY(check_range(FN, "range", (uintptr_t)p, n, USE_DEVICE, &ref));
	END
}

/* ---------- modules ---------- */

typedef struct { char *ptx; } fast_module;

static void jit_log(unsigned n, const int *opts, void **vals, int which, int size_opt, const char *msg) {
	char *buf = NULL;
	size_t cap = 0;
	int size_idx = -1;
	for (unsigned i = 0; opts && vals && i < n; i++) {
		if (opts[i] == which) buf = vals[i];
		if (opts[i] == size_opt) {
			cap = (size_t)(uintptr_t)vals[i];
			size_idx = (int)i;
		}
	}
	if (buf == NULL || cap == 0) return;
	int w = snprintf(buf, cap, "%s", msg);
	if (size_idx >= 0) vals[size_idx] = (void *)(uintptr_t)((size_t)w < cap ? (size_t)w : cap - 1);
}

EXPORT CUresult cuModuleLoadDataEx(H *out, const void *img, unsigned n, int *opts, void **vals) {
	if (!strict()) {
		const unsigned char *b = img;
		fast_module *m = malloc(sizeof *m);
		int ptx = !(b[0] == 0x7f && b[1] == 'E') && rd32(b) != 0xBA55ED50u;
		m->ptx = strdup(ptx ? (const char *)img : "");
		*out = (H)m;
		return OK;
	}
	BEGIN("cuModuleLoadDataEx");
	ctx_t *c;
	if (out == NULL || img == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	size_t len;
	int kind = image_kind(img, &len);
	if (kind == IMG_PTX && !strstr(img, ".entry") && !strstr(img, ".version")) {
		jit_log(n, opts, vals, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
			"ptxas fatal   : fakecuda: the image is neither a cubin, a fatbin nor PTX (no .version, no .entry)");
		jit_log(n, opts, vals, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
		FAIL(E_INVALID_PTX);
	}
	jit_log(n, opts, vals, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "");
	jit_log(n, opts, vals, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
	module_t *m = h_new(H_MODULE, c);
	if (m == NULL) FAIL(E_OUT_OF_MEMORY);
	m->kind = kind;
	m->len = len;
	m->image = malloc(len + 1);
	if (m->image == NULL) abort();
	memcpy(m->image, img, len);
	m->image[len] = 0;
	*out = (H)m;
	END
}

EXPORT CUresult cuModuleLoadData(H *out, const void *img) { return cuModuleLoadDataEx(out, img, 0, NULL, NULL); }

EXPORT CUresult cuModuleGetFunction(H *out, H hm, const char *name) {
	if (!strict()) {
		fast_module *m = (fast_module *)hm;
		layout *l = calloc(1, sizeof *l);
		const char *p = *m->ptx ? find_entry(m->ptx, name) : NULL;
		if (p == NULL && *m->ptx) { free(l); return E_NOT_FOUND; }
		if (p) parse_params(p, l);
		*out = (H)l;
		return OK;
	}
	BEGIN("cuModuleGetFunction");
	module_t *m;
	if (out == NULL || name == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hm, H_MODULE, (void **)&m));
	for (func_t *f = m->funcs; f; f = f->next) {
		if (strcmp(f->name, name) == 0) {
			*out = (H)f; // the same handle for the same name, as the driver does
			goto out;
		}
	}
	const char *p = NULL;
	if (m->kind == IMG_PTX && (p = find_entry(m->image, name)) == NULL) FAIL(E_NOT_FOUND);
	func_t *f = h_new(H_FUNC, m->h.ctx);
	if (f == NULL) FAIL(E_OUT_OF_MEMORY);
	f->mod = m;
	f->name = strdup(name);
	if (p) parse_params(p, &f->l); // cubins and fatbins: no parameters
	f->next = m->funcs;
	m->funcs = f;
	*out = (H)f;
	END
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, H hm, const char *name) {
	if (!strict()) {
		if (bytes) *bytes = 8;
		if (dptr) *dptr = fast_ptr(8);
		return OK;
	}
	BEGIN("cuModuleGetGlobal_v2");
	module_t *m;
	if (name == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hm, H_MODULE, (void **)&m));
	gvar_t *g;
	for (g = m->globals; g; g = g->next)
		if (strcmp(g->name, name) == 0) break;
	if (g == NULL) {
		int64_t size = 8; // cubins and fatbins: 8 bytes for any name
		int elem = 0;
		const char *init = NULL;
		if (m->kind == IMG_PTX && (size = find_global(m->image, name, &elem, &init)) < 0) FAIL(E_NOT_FOUND);
		if (size == 0) size = 8;
		mem_t *mm;
		TRY(mem_alloc(m->h.ctx, m->h.ctx->dev, MK_GLOBAL, API_GLOBAL, NULL, (size_t)size, 0, &mm));
		if (init) init_global((char *)mm->base, mm->size, elem, init);
		g = calloc(1, sizeof *g);
		if (g == NULL) abort();
		g->name = strdup(name);
		g->m = mm;
		g->next = m->globals;
		m->globals = g;
	}
	if (dptr) *dptr = g->m->base;
	if (bytes) *bytes = g->m->size;
	END
}

// cuModuleUnload waits for all the context's work first, as measured on the driver.
EXPORT CUresult cuModuleUnload(H hm) {
	if (!strict()) {
		fast_module *m = (fast_module *)hm;
		free(m->ptx);
		free(m);
		return OK;
	}
	inject_slow(DK_MODULE);
	BEGIN("cuModuleUnload");
	module_t *m;
	hdr *h = h_at(hm);
	if (h && h->type == H_MODULE && h->dead) {
		violation(FN, "module %#lx unloaded twice", (unsigned long)hm);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, hm, H_MODULE, (void **)&m));
	int code = inject_fail(DK_MODULE);
	if (code) FAIL(code);
	ctx_t *c = m->h.ctx;
	WAIT_WHILE(c->pending > 0);
	if (!m->h.dead) module_kill(m);
	END
}

static CUresult get_func(const char *FN, H hf, func_t **out) {
	CUresult r = get_h(FN, hf, H_FUNC, (void **)out);
	if (r == OK && (*out)->mod->h.dead) {
		violation(FN, "function %#lx of unloaded module %#lx", (unsigned long)hf, (unsigned long)(uintptr_t)(*out)->mod);
		r = E_INVALID_HANDLE;
	}
	return r;
}

EXPORT CUresult cuFuncGetParamInfo(H hf, size_t i, size_t *off, size_t *size) {
	if (!strict()) {
		layout *l = (layout *)hf;
		if (i >= l->n) return E_INVALID_VALUE;
		if (off) *off = l->off[i];
		if (size) *size = l->size[i];
		return OK;
	}
	BEGIN("cuFuncGetParamInfo");
	func_t *f;
	TRY(get_func(FN, hf, &f));
	if (i >= f->l.n) FAIL(E_INVALID_VALUE); // past the last parameter, as the driver answers
	if (off) *off = f->l.off[i];
	if (size) *size = f->l.size[i];
	END
}

EXPORT CUresult cuFuncGetAttribute(int *v, int attr, H hf) {
	if (!strict()) { *v = attr == CU_FUNC_ATTRIBUTE_NUM_REGS ? 32 : 1024; return OK; }
	BEGIN("cuFuncGetAttribute");
	func_t *f;
	if (v == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_func(FN, hf, &f));
	switch (attr) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dyn_smem; break;
	default:
		if (attr < 0 || attr >= CU_FUNC_ATTRIBUTE_MAX) FAIL(E_INVALID_VALUE);
		*v = 0;
	}
	END
}

EXPORT CUresult cuFuncSetAttribute(H hf, int attr, int v) {
	if (!strict()) return OK;
	BEGIN("cuFuncSetAttribute");
	func_t *f;
	TRY(get_func(FN, hf, &f));
	if (attr < 0 || attr >= CU_FUNC_ATTRIBUTE_MAX) FAIL(E_INVALID_VALUE);
	if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
		if (v < 0 || v > 232448) FAIL(E_INVALID_VALUE); // the opt-in maximum
		f->max_dyn_smem = v;
	}
	END
}

EXPORT CUresult cuFuncGetName(const char **name, H hf) {
	if (!strict()) { *name = "fake"; return OK; }
	BEGIN("cuFuncGetName");
	func_t *f;
	if (name == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_func(FN, hf, &f));
	*name = f->name;
	END
}

EXPORT CUresult cuFuncGetModule(H *out, H hf) {
	if (!strict()) { *out = 0; return OK; }
	BEGIN("cuFuncGetModule");
	func_t *f;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_func(FN, hf, &f));
	*out = (H)f->mod;
	END
}

/* ---------- launches ---------- */

// scan_params checks every 8-byte parameter that holds an address of tracked memory:
// freed, free-pending or unregistered memory is a violation (the driver would accept
// the launch; the kernel would fault), live memory becomes a reference checked again
// when the kernel runs. Device memory of another device than the kernel's needs
// peer access (cuCtxEnablePeerAccess, or the pool's cuMemPoolSetAccess): without
// it the kernel would fault, a violation.
static void scan_params(const char *FN, const char *what, func_t *f, const uint8_t *buf, op_t *o) {
	ctx_t *kc = f->h.ctx;
	for (size_t i = 0; i < f->l.n; i++) {
		if (f->l.size[i] != 8 || f->l.off[i] % 8) continue;
		uint64_t v;
		memcpy(&v, buf + f->l.off[i], 8);
		mem_t *m = mem_find((uintptr_t)v);
		if (m) {
			if (m->r.state != ST_LIVE)
				violation(FN, "%s with freed memory: %s parameter %zu = %#llx, in the %s allocation [%#lx, +%zu) (%s)", what,
					f->name, i, (unsigned long long)v, mkname[m->kind], (unsigned long)m->base, m->size, stname[m->r.state]);
			else {
				if (kc && m->kind == MK_DEVICE && m->dev != kc->dev && !peer_reaches(kc, m))
					violation(FN, "%s on device %d with memory of device %d without peer access: %s parameter %zu = %#llx, in [%#lx, +%zu)",
						what, kc->dev, m->dev, f->name, i, (unsigned long long)v, (unsigned long)m->base, m->size);
				op_ref(o, &m->r);
			}
			continue;
		}
		reg_t *g = reg_find((uintptr_t)v);
		if (g == NULL) continue;
		if (g->r.state != ST_LIVE)
			violation(FN, "%s with unregistered host memory: %s parameter %zu = %#llx, in [%#lx, +%zu), unregistered", what,
				f->name, i, (unsigned long long)v, (unsigned long)g->base, g->size);
		else
			op_ref(o, &g->r);
	}
}

static fakecuda_launch *record_launch(op_t *o, H hs, ctx_t *c) {
	if (ring == NULL && (ring = calloc(RING, sizeof *ring)) == NULL) abort();
	int64_t seq = ++launch_seq;
	fakecuda_launch *rec = &ring[(seq - 1) % RING];
	memset(rec, 0, sizeof *rec);
	rec->seq = seq;
	memcpy(rec->grid, o->u.k.grid, sizeof rec->grid);
	memcpy(rec->block, o->u.k.block, sizeof rec->block);
	rec->shared_mem = o->u.k.shm;
	rec->param_size = (uint32_t)o->u.k.psize;
	rec->stream = hs;
	rec->context = (uint64_t)(uintptr_t)c;
	size_t nl = strnlen(o->u.k.f->name, sizeof rec->func - 1);
	memcpy(rec->func, o->u.k.f->name, nl);
	rec->func[nl] = 0;
	size_t n = o->u.k.psize < REC_PARAMS ? o->u.k.psize : REC_PARAMS;
	if (n) memcpy(rec->params, o->u.k.params, n);
	return rec;
}

// kernel_op checks a launch of f (its shape, then its parameters, given as
// kernelParams or as an extra buffer) and returns the operation, with the parameters
// copied and scanned for device pointers (what: "launch", "kernel node"...). A shape
// the driver refuses is CUDA_ERROR_INVALID_VALUE; malformed parameters are a
// violation too.
static CUresult kernel_op(const char *FN, const char *what, func_t *f, const unsigned grid[3], const unsigned block[3],
	unsigned shm, void **params, void **extra, op_t **out) {
	unsigned gx = grid[0], gy = grid[1], gz = grid[2], bx = block[0], by = block[1], bz = block[2];
	*out = NULL;
	if (!gx || !gy || !gz || !bx || !by || !bz) return E_INVALID_VALUE;
	if (bx > 1024 || by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024) return E_INVALID_VALUE;
	if (gx > 2147483647u || gy > 65535 || gz > 65535) return E_INVALID_VALUE;
	if (shm > (unsigned)(f->max_dyn_smem > 48 * 1024 ? f->max_dyn_smem : 48 * 1024)) return E_INVALID_VALUE;
	size_t size = f->l.argsize;
	op_t *o = op_new(OP_KERNEL, FN);
	uint8_t *buf = size == 0 ? NULL : size <= sizeof o->pbuf ? o->pbuf : malloc(size);
	if (size && buf == NULL) abort();
	o->u.k.params = buf;
	o->u.k.psize = size;
	if (params && extra) {
		violation(FN, "malformed %s of %s: both kernelParams and extra", what, f->name);
		op_free(o);
		return E_INVALID_VALUE;
	}
	if (extra) {
		const void *bp = NULL;
		const size_t *bs = NULL;
		int bad = 0;
		for (size_t i = 0; extra[i] != (void *)CU_LAUNCH_PARAM_END; i += 2) {
			uintptr_t key = (uintptr_t)extra[i];
			if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) bp = extra[i + 1];
			else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) bs = extra[i + 1];
			else { bad = 1; break; }
			if (i > 64) { bad = 1; break; } // no END
		}
		if (bad || bp == NULL || bs == NULL || *bs != size) {
			violation(FN, "malformed %s of %s: extra gives %s%zu bytes of parameters, the kernel takes %zu", what, f->name,
				bad ? "an unknown key, " : (bp == NULL ? "no buffer, " : ""), bs ? *bs : 0, size);
			op_free(o);
			return E_INVALID_VALUE;
		}
		if (size) memcpy(buf, bp, size);
	} else if (params) {
		for (size_t i = 0; i < f->l.n; i++) {
			if (params[i] == NULL) {
				violation(FN, "malformed %s of %s: kernelParams[%zu] is NULL", what, f->name, i);
				op_free(o);
				return E_INVALID_VALUE;
			}
			memcpy(buf + f->l.off[i], params[i], f->l.size[i]);
		}
	} else if (f->l.n) {
		violation(FN, "malformed %s of %s: no parameters given, the kernel takes %zu", what, f->name, f->l.n);
		op_free(o);
		return E_INVALID_VALUE;
	}
	o->u.k.f = f;
	o->u.k.ns = kernel_ns;
	memcpy(o->u.k.grid, grid, sizeof o->u.k.grid);
	memcpy(o->u.k.block, block, sizeof o->u.k.block);
	o->u.k.shm = shm;
	scan_params(FN, what, f, buf ? buf : (const uint8_t *)"", o);
	*out = o;
	return OK;
}

EXPORT CUresult cuLaunchKernel(H hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
	unsigned shm, H hs, void **params, void **extra) {
	if (!strict()) {
		if ((uint64_t)bx * by * bz > 1024) return E_INVALID_VALUE; // more threads than a block holds
		return OK;
	}
	BEGIN("cuLaunchKernel");
	ctx_t *c;
	func_t *f;
	stream_t *s;
	op_t *o;
	TRY(need_ctx(FN, &c));
	TRY(get_func(FN, hf, &f));
	TRY(get_stream(FN, hs, &s));
	TRY(kernel_op(FN, "launch", f, (const unsigned[3]){gx, gy, gz}, (const unsigned[3]){bx, by, bz}, shm, params, extra, &o));
	if (!(s && s->capture)) record_launch(o, hs, c);
	submit(c, s, o);
	END
}

// The fake device's occupancy: 132 multiprocessors of 2048 threads, 32 blocks and
// 228 KiB of shared memory each (an H100's).
enum { FAKE_SMS = 132, FAKE_SM_THREADS = 2048, FAKE_SM_BLOCKS = 32, FAKE_SM_SHMEM = 233472 };

static int fake_blocks_per_sm(unsigned threads, size_t shm) {
	if (threads == 0 || threads > 1024) return 0;
	int n = FAKE_SM_THREADS / (int)threads;
	if (n > FAKE_SM_BLOCKS) n = FAKE_SM_BLOCKS;
	if (shm && (int)(FAKE_SM_SHMEM / shm) < n) n = (int)(FAKE_SM_SHMEM / shm);
	return n;
}

// CUlaunchConfig and CUlaunchAttribute as cuda.h lays them out.
typedef struct {
	int id;
	char pad[4];
	union {
		char raw[64];
		int i;
		struct { unsigned x, y, z; } dim;
	} v;
} fake_launch_attr;
typedef struct {
	unsigned gx, gy, gz, bx, by, bz, shm;
	H stream;
	fake_launch_attr *attrs;
	unsigned n;
} fake_launch_config;

enum { ATTR_IGNORE = 0, ATTR_COOPERATIVE = 2, ATTR_CLUSTER = 4, ATTR_PROGRAMMATIC = 6, ATTR_PRIORITY = 8 };

EXPORT CUresult cuLaunchKernelEx(const fake_launch_config *cfg, H hf, void **params, void **extra) {
	if (!strict()) return OK;
	BEGIN("cuLaunchKernelEx");
	ctx_t *c;
	func_t *f;
	stream_t *s;
	op_t *o;
	if (cfg == NULL || (cfg->n && cfg->attrs == NULL)) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(get_func(FN, hf, &f));
	TRY(get_stream(FN, cfg->stream, &s));
	unsigned cluster[3] = {0, 0, 0};
	int coop = 0, prog = 0, prio = 0;
	for (unsigned i = 0; i < cfg->n; i++) {
		const fake_launch_attr *a = &cfg->attrs[i];
		switch (a->id) {
		case ATTR_IGNORE: break;
		case ATTR_COOPERATIVE: coop = a->v.i != 0; break;
		case ATTR_PROGRAMMATIC: prog = a->v.i != 0; break;
		case ATTR_PRIORITY: prio = a->v.i; break;
		case ATTR_CLUSTER:
			cluster[0] = a->v.dim.x, cluster[1] = a->v.dim.y, cluster[2] = a->v.dim.z;
			if (!cluster[0] || !cluster[1] || !cluster[2] || cfg->gx % cluster[0] || cfg->gy % cluster[1] ||
				cfg->gz % cluster[2] || (uint64_t)cluster[0] * cluster[1] * cluster[2] > 16)
				FAIL(E_INVALID_VALUE);
			break;
		default:
			FAIL(E_NOT_SUPPORTED); // an attribute the fake does not model
		}
	}
	if (coop) {
		uint64_t blocks = (uint64_t)cfg->gx * cfg->gy * cfg->gz;
		int per = fake_blocks_per_sm(cfg->bx * cfg->by * cfg->bz, cfg->shm);
		if (blocks > (uint64_t)per * FAKE_SMS) FAIL(E_COOPERATIVE_LAUNCH_TOO_LARGE);
	}
	TRY(kernel_op(FN, "launch", f, (const unsigned[3]){cfg->gx, cfg->gy, cfg->gz},
		(const unsigned[3]){cfg->bx, cfg->by, cfg->bz}, cfg->shm, params, extra, &o));
	if (!(s && s->capture)) {
		fakecuda_launch *rec = record_launch(o, cfg->stream, c);
		memcpy(rec->cluster, cluster, sizeof cluster);
		rec->priority = prio;
		rec->cooperative = (uint8_t)coop;
		rec->programmatic = (uint8_t)prog;
	}
	submit(c, s, o);
	END
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, H hf, int block, size_t shm) {
	if (!strict()) { *n = fake_blocks_per_sm((unsigned)block, shm); return OK; }
	BEGIN("cuOccupancyMaxActiveBlocksPerMultiprocessor");
	ctx_t *c;
	func_t *f;
	if (n == NULL || block <= 0) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(get_func(FN, hf, &f));
	*n = fake_blocks_per_sm((unsigned)block, shm);
	END
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *block, H hf, void *b2d, size_t shm, int limit) {
	if (!strict()) { *grid = 2 * FAKE_SMS; *block = 1024; return OK; }
	BEGIN("cuOccupancyMaxPotentialBlockSize");
	ctx_t *c;
	func_t *f;
	if (grid == NULL || block == NULL || b2d != NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(get_func(FN, hf, &f));
	int best = 0, bestThreads = 0;
	for (int b = 32; b <= 1024 && (limit <= 0 || b <= limit); b += 32) {
		int t = fake_blocks_per_sm((unsigned)b, shm) * b;
		if (t >= bestThreads) best = b, bestThreads = t;
	}
	if (best == 0) FAIL(E_INVALID_VALUE);
	*block = best;
	*grid = fake_blocks_per_sm((unsigned)best, shm) * FAKE_SMS;
	END
}

/* ---------- stream capture and graphs ---------- */

static uint64_t capture_seq; // capture sequences begun (G held)

// fast_node is a fast-mode node handle: a fake handle with the node type in its low
// bits (fast handles are multiples of 16), for cuGraphNodeGetType.
static H fast_node(int type) { return fast_handle() | (H)type; }

// free_op_list frees a list of operations; those of a graph (not of an exec) take
// their nodes with them.
static void cond_kill_bodies(op_t *o);
static void free_op_list(op_t *o, int kill_nodes) {
	for (op_t *next; o; o = next) {
		next = o->next;
		if (kill_nodes && o->node) h_kill(&o->node->h);
		if (kill_nodes && o->type == OP_COND) cond_kill_bodies(o);
		op_free(o);
	}
}

static void graph_free_ops(graph_t *g) {
	free_op_list(g->head, g->h.type == H_GRAPH);
	g->head = g->tail = NULL;
	g->n = 0;
}

// graph_truncate drops the operations after mark (NULL: all of them), and their nodes.
static void graph_truncate(graph_t *g, op_t *mark) {
	op_t *rest = mark ? mark->next : g->head;
	if (mark) mark->next = NULL;
	else g->head = NULL;
	g->tail = mark;
	free_op_list(rest, 1);
	g->n = 0;
	for (op_t *o = g->head; o; o = o->next) g->n++;
}

// get_node validates a node handle: a node that is not one, or whose graph was
// destroyed, is a violation.
static CUresult get_node(const char *FN, H v, node_t **out) {
	CUresult r = get_h(FN, v, H_NODE, (void **)out);
	if (r == OK && (*out)->g->h.dead) {
		violation(FN, "node %#lx of destroyed graph %#lx", (unsigned long)v, (unsigned long)(uintptr_t)(*out)->g);
		*out = NULL;
		r = E_INVALID_HANDLE;
	}
	return r;
}

static node_t *node_new(graph_t *g, int type, uint64_t nid) {
	node_t *n = h_new(H_NODE, g->h.ctx);
	if (n == NULL) return NULL;
	n->g = g;
	n->type = type;
	n->nid = nid ? nid : ++nid_seq;
	return n;
}

// node_of returns the node of o, an operation of g, making one for a captured
// operation (NULL: out of handles).
static node_t *node_of(graph_t *g, op_t *o) {
	static const int type_of[] = {
		[OP_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [OP_COPY] = CU_GRAPH_NODE_TYPE_MEMCPY,
		[OP_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET, [OP_RECORD] = CU_GRAPH_NODE_TYPE_EVENT_RECORD,
		[OP_WAIT] = CU_GRAPH_NODE_TYPE_WAIT_EVENT, [OP_FREE] = CU_GRAPH_NODE_TYPE_EMPTY, [OP_HOSTFN] = CU_GRAPH_NODE_TYPE_HOST,
		[OP_DELAY] = CU_GRAPH_NODE_TYPE_EMPTY, [OP_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY,
		[OP_COND] = CU_GRAPH_NODE_TYPE_CONDITIONAL,
	};
	if (o->node == NULL) o->node = node_new(g, type_of[o->type], o->nid); // a captured operation is its node's only one
	return o->node;
}

// check_deps validates the dependencies of a new node (or of a capture into g): each
// must be a live node (else a violation) of g (else CUDA_ERROR_INVALID_VALUE), with
// edge data the driver accepts. They all precede the new node in g's list, which is
// the order the fake runs the graph in.
static CUresult check_deps(const char *FN, graph_t *g, const H *deps, const CUgraphEdgeData *edges, size_t n) {
	if (n && deps == NULL) return E_INVALID_VALUE;
	for (size_t i = 0; i < n; i++) {
		node_t *d;
		CUresult r = get_node(FN, deps[i], &d);
		if (r != OK) return r;
		if (d->g != g) return E_INVALID_VALUE;
		if (edges) {
			const CUgraphEdgeData *e = &edges[i];
			static const unsigned char zero[5];
			if (e->to_port || e->type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || e->from_port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER ||
				memcmp(e->reserved, zero, sizeof zero) != 0)
				return E_INVALID_VALUE;
			if ((e->type || e->from_port) && d->type != CU_GRAPH_NODE_TYPE_KERNEL) return E_INVALID_VALUE; // ports are kernels'
		}
	}
	return OK;
}

// node_prologue checks what every cuGraphAdd*Node takes.
static CUresult node_prologue(const char *FN, H *out, H hg, const H *deps, size_t n, graph_t **g) {
	*g = NULL;
	if (out == NULL) return E_INVALID_VALUE;
	CUresult r = get_h(FN, hg, H_GRAPH, (void **)g);
	if (r != OK) return r;
	return check_deps(FN, *g, deps, NULL, n);
}

// node_add appends a new node of g with the operations ops (a list; NULL: a
// placeholder) and returns its handle in *out.
static CUresult node_add(const char *FN, graph_t *g, int type, op_t *ops, H *out) {
	node_t *n = node_new(g, type, 0);
	if (n == NULL) {
		free_op_list(ops, 0);
		return E_OUT_OF_MEMORY;
	}
	if (ops == NULL) ops = op_new(OP_EMPTY, FN);
	for (op_t *o = ops, *next; o; o = next) {
		next = o->next;
		o->nid = n->nid;
		o->node = n;
		graph_append(g, o);
	}
	*out = (H)n;
	return OK;
}

// node_ctx returns the context a memset or memcpy node names (NULL: the current one).
static CUresult node_ctx(const char *FN, H hc, ctx_t **c) {
	if (hc == 0) return need_ctx(FN, c);
	return get_h(FN, hc, H_CTX, (void **)c);
}

EXPORT CUresult cuGraphAddEmptyNode(H *out, H hg, const H *deps, size_t n) {
	if (!strict()) { if (out == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_EMPTY); return OK; }
	BEGIN("cuGraphAddEmptyNode");
	graph_t *g;
	TRY(node_prologue(FN, out, hg, deps, n, &g));
	r = node_add(FN, g, CU_GRAPH_NODE_TYPE_EMPTY, NULL, out);
	END
}

// cuGraphAddMemsetNode: width elements of elementSize (1, 2 or 4) bytes, in height
// rows pitch bytes apart, all inside one live device allocation (or registration).
EXPORT CUresult cuGraphAddMemsetNode(H *out, H hg, const H *deps, size_t n, const CUDA_MEMSET_NODE_PARAMS *p, H hc) {
	if (!strict()) { if (out == NULL || p == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_MEMSET); return OK; }
	BEGIN("cuGraphAddMemsetNode");
	graph_t *g;
	ctx_t *c;
	rng_t *ref;
	TRY(node_prologue(FN, out, hg, deps, n, &g));
	if (p == NULL) FAIL(E_INVALID_VALUE);
	TRY(node_ctx(FN, hc, &c));
	size_t elem = p->elementSize, row, span;
	if (elem != 1 && elem != 2 && elem != 4) FAIL(E_INVALID_VALUE);
	if (p->width == 0 || p->height == 0 || p->dst % elem) FAIL(E_INVALID_VALUE);
	if (__builtin_mul_overflow(p->width, elem, &row)) FAIL(E_INVALID_VALUE);
	span = row;
	if (p->height > 1) {
		if (p->pitch < row || p->pitch % elem) FAIL(E_INVALID_VALUE);
		if (__builtin_mul_overflow(p->height - 1, p->pitch, &span) || __builtin_add_overflow(span, row, &span)) FAIL(E_INVALID_VALUE);
	}
	TRY(check_range(FN, "destination", (uintptr_t)p->dst, span, USE_DEVICE, &ref));
	op_t *o = op_new(OP_MEMSET, FN);
	o->u.ms.dst = (char *)(uintptr_t)p->dst;
	o->u.ms.val = p->value;
	o->u.ms.count = p->width;
	o->u.ms.elem = (int)elem;
	o->u.ms.pitch = p->pitch;
	o->u.ms.rows = p->height;
	op_ref(o, ref);
	r = node_add(FN, g, CU_GRAPH_NODE_TYPE_MEMSET, o, out);
	END
}

// copy_side checks one side of a CUDA_MEMCPY3D: its memory type (host: the host
// pointer, pageable or not; device: the device pointer; unified: the device pointer,
// which may be either; arrays: not implemented), and that the bytes it covers lie in
// one live allocation or registration where they are tracked. *start is the address
// of its first byte.
static CUresult copy_side(const char *FN, const char *what, int type, const void *host, CUdeviceptr dev, size_t x, size_t y,
	size_t z, size_t lod, size_t pitch, size_t height, size_t w, size_t h, size_t d, uintptr_t *start, rng_t **ref) {
	uintptr_t base;
	int use;
	switch (type) {
	case CU_MEMORYTYPE_HOST: base = (uintptr_t)host, use = USE_HOST; break;
	case CU_MEMORYTYPE_DEVICE: base = (uintptr_t)dev, use = USE_DEVICE; break;
	case CU_MEMORYTYPE_UNIFIED: base = (uintptr_t)dev, use = USE_HOST; break;
	case CU_MEMORYTYPE_ARRAY: return E_NOT_SUPPORTED; // the fake has no arrays
	default: return E_INVALID_VALUE;
	}
	if (lod) return E_INVALID_VALUE; // arrays only
	if ((h > 1 || d > 1 || y || z) && pitch < w) return E_INVALID_VALUE;
	if ((d > 1 || z) && height < h) return E_INVALID_VALUE;
	size_t off, ext;
	// The first byte: x + (z * height + y) * pitch; the extent: up to the last row's end.
	if (__builtin_mul_overflow(z, height, &off) || __builtin_add_overflow(off, y, &off) ||
		__builtin_mul_overflow(off, pitch, &off) || __builtin_add_overflow(off, x, &off))
		return E_INVALID_VALUE;
	if (__builtin_mul_overflow(d - 1, height, &ext) || __builtin_add_overflow(ext, h - 1, &ext) ||
		__builtin_mul_overflow(ext, pitch, &ext) || __builtin_add_overflow(ext, w, &ext))
		return E_INVALID_VALUE;
	if (d == 1 && h == 1) ext = w;
	*start = base + off;
	return check_range(FN, what, *start, ext, use, ref);
}

// cuGraphAddMemcpyNode: a copy of Depth slices of Height rows of WidthInBytes bytes
// between host, device or unified memory (not arrays). Copies involving pageable
// memory read and write it when the graph runs.
EXPORT CUresult cuGraphAddMemcpyNode(H *out, H hg, const H *deps, size_t n, const CUDA_MEMCPY3D *p, H hc) {
	if (!strict()) { if (out == NULL || p == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_MEMCPY); return OK; }
	BEGIN("cuGraphAddMemcpyNode");
	graph_t *g;
	ctx_t *c;
	uintptr_t src, dst;
	rng_t *sref, *dref;
	TRY(node_prologue(FN, out, hg, deps, n, &g));
	if (p == NULL) FAIL(E_INVALID_VALUE);
	TRY(node_ctx(FN, hc, &c));
	size_t w = p->WidthInBytes, h = p->Height, d = p->Depth;
	if (p->reserved0 || p->reserved1 || w == 0 || h == 0 || d == 0) FAIL(E_INVALID_VALUE);
	TRY(copy_side(FN, "source", p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD,
		p->srcPitch, p->srcHeight, w, h, d, &src, &sref));
	TRY(copy_side(FN, "destination", p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD,
		p->dstPitch, p->dstHeight, w, h, d, &dst, &dref));
	op_t *o = op_new(OP_COPY, FN);
	o->u.cp.dst = (char *)dst;
	o->u.cp.src = (const char *)src;
	o->u.cp.n = w;
	o->u.cp.height = h;
	o->u.cp.depth = d;
	o->u.cp.spitch = p->srcPitch;
	o->u.cp.dpitch = p->dstPitch;
	o->u.cp.sheight = p->srcHeight;
	o->u.cp.dheight = p->dstHeight;
	op_ref(o, sref);
	op_ref(o, dref);
	r = node_add(FN, g, CU_GRAPH_NODE_TYPE_MEMCPY, o, out);
	END
}

// kparams_v1 reads the fields of a CUDA_KERNEL_NODE_PARAMS that its _v1 has (the same
// offsets), and the kern field (0 for _v1).
static CUDA_KERNEL_NODE_PARAMS_v1 kparams_v1(const CUDA_KERNEL_NODE_PARAMS *p, H *kern) {
	CUDA_KERNEL_NODE_PARAMS_v1 v;
	memcpy(&v, p, sizeof v);
	*kern = p->kern;
	return v;
}

// node_func returns the function of kernel node parameters: func (a CUkernel, kern,
// is not supported: the fake has no libraries).
static CUresult node_func(const char *FN, const CUDA_KERNEL_NODE_PARAMS_v1 *p, H kern, func_t **f) {
	*f = NULL;
	if (p->func == 0) return kern ? E_NOT_SUPPORTED : E_INVALID_VALUE;
	return get_func(FN, p->func, f);
}

// node_kernel_op checks a kernel node's parameters as cuLaunchKernel checks a launch,
// and makes its operation: the parameters are copied now.
static CUresult node_kernel_op(const char *FN, const char *what, func_t *f, const CUDA_KERNEL_NODE_PARAMS_v1 *p, op_t **o) {
	return kernel_op(FN, what, f, (const unsigned[3]){p->gridDimX, p->gridDimY, p->gridDimZ},
		(const unsigned[3]){p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes, p->kernelParams, p->extra, o);
}

static CUresult kernel_node(const char *FN, H *out, H hg, const H *deps, size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p, H kern) {
	graph_t *g;
	func_t *f;
	op_t *o;
	CUresult r = node_prologue(FN, out, hg, deps, n, &g);
	if (r != OK) return r;
	if ((r = node_func(FN, p, kern, &f)) != OK) return r;
	if ((r = node_kernel_op(FN, "kernel node", f, p, &o)) != OK) return r;
	return node_add(FN, g, CU_GRAPH_NODE_TYPE_KERNEL, o, out);
}

EXPORT CUresult cuGraphAddKernelNode_v2(H *out, H hg, const H *deps, size_t n, const CUDA_KERNEL_NODE_PARAMS *p) {
	if (!strict()) {
		if (out == NULL || p == NULL || (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ > 1024) return E_INVALID_VALUE;
		*out = fast_node(CU_GRAPH_NODE_TYPE_KERNEL);
		return OK;
	}
	BEGIN("cuGraphAddKernelNode_v2");
	H kern;
	if (p == NULL) FAIL(E_INVALID_VALUE);
	CUDA_KERNEL_NODE_PARAMS_v1 v = kparams_v1(p, &kern);
	r = kernel_node(FN, out, hg, deps, n, &v, kern);
	END
}

// cuGraphAddKernelNode is the entry point of drivers before CUDA 12.0 (and of
// programs built against them), with CUDA_KERNEL_NODE_PARAMS_v1.
EXPORT CUresult cuGraphAddKernelNode(H *out, H hg, const H *deps, size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
	if (!strict()) {
		if (out == NULL || p == NULL || (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ > 1024) return E_INVALID_VALUE;
		*out = fast_node(CU_GRAPH_NODE_TYPE_KERNEL);
		return OK;
	}
	BEGIN("cuGraphAddKernelNode");
	if (p == NULL) FAIL(E_INVALID_VALUE);
	r = kernel_node(FN, out, hg, deps, n, p, 0);
	END
}

// cuGraphAddChildGraphNode copies the child's operations: the child stays
// independent of the node, as in CUDA.
EXPORT CUresult cuGraphAddChildGraphNode(H *out, H hg, const H *deps, size_t n, H hchild) {
	if (!strict()) { if (out == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_GRAPH); return OK; }
	BEGIN("cuGraphAddChildGraphNode");
	graph_t *g, *child;
	TRY(node_prologue(FN, out, hg, deps, n, &g));
	TRY(get_h(FN, hchild, H_GRAPH, (void **)&child));
	if (child == g) FAIL(E_INVALID_VALUE);
	op_t *ops = NULL, **tail = &ops;
	for (op_t *o = child->head; o; o = o->next) {
		op_t *k = op_clone(o);
		*tail = k;
		tail = &k->next;
	}
	r = node_add(FN, g, CU_GRAPH_NODE_TYPE_GRAPH, ops, out);
	END
}

static CUresult event_node(const char *FN, H *out, H hg, const H *deps, size_t n, H he, int op, int type) {
	graph_t *g;
	event_t *e;
	CUresult r = node_prologue(FN, out, hg, deps, n, &g);
	if (r != OK) return r;
	if ((r = get_h(FN, he, H_EVENT, (void **)&e)) != OK) return r;
	op_t *o = op_new(op, FN);
	o->u.ev.e = e;
	return node_add(FN, g, type, o, out);
}

EXPORT CUresult cuGraphAddEventRecordNode(H *out, H hg, const H *deps, size_t n, H he) {
	if (!strict()) { if (out == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_EVENT_RECORD); return OK; }
	BEGIN("cuGraphAddEventRecordNode");
	r = event_node(FN, out, hg, deps, n, he, OP_RECORD, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
	END
}

EXPORT CUresult cuGraphAddEventWaitNode(H *out, H hg, const H *deps, size_t n, H he) {
	if (!strict()) { if (out == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_WAIT_EVENT); return OK; }
	BEGIN("cuGraphAddEventWaitNode");
	r = event_node(FN, out, hg, deps, n, he, OP_WAIT, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
	END
}

// cuGraphAddHostNode: a call of fn(userData) on a thread of the driver when a replay
// gets to the node (in the fake, when the operation runs).
EXPORT CUresult cuGraphAddHostNode(H *out, H hg, const H *deps, size_t n, const CUDA_HOST_NODE_PARAMS *p) {
	if (!strict()) { if (out == NULL || p == NULL) return E_INVALID_VALUE; *out = fast_node(CU_GRAPH_NODE_TYPE_HOST); return OK; }
	BEGIN("cuGraphAddHostNode");
	graph_t *g;
	TRY(node_prologue(FN, out, hg, deps, n, &g));
	if (p == NULL || p->fn == NULL) FAIL(E_INVALID_VALUE);
	op_t *o = op_new(OP_HOSTFN, FN);
	o->u.hf.fn = p->fn;
	o->u.hf.arg = p->userData;
	r = node_add(FN, g, CU_GRAPH_NODE_TYPE_HOST, o, out);
	END
}

// cuGraphGetNodes lists g's nodes in the order they run (captured operations get
// nodes now).
EXPORT CUresult cuGraphGetNodes(H hg, H *nodes, size_t *num) {
	if (!strict()) { if (num == NULL) return E_INVALID_VALUE; if (nodes) memset(nodes, 0, *num * sizeof *nodes); *num = 0; return OK; }
	BEGIN("cuGraphGetNodes");
	graph_t *g;
	if (num == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	size_t count = 0, k = 0;
	uint64_t last = 0;
	if (nodes == NULL) {
		for (op_t *o = g->head; o; o = o->next)
			if (o->nid != last) count++, last = o->nid;
		*num = count;
		goto out;
	}
	for (op_t *o = g->head; o && k < *num; o = o->next) {
		if (o->nid == last) continue;
		node_t *nd = node_of(g, o);
		if (nd == NULL) FAIL(E_OUT_OF_MEMORY);
		nodes[k++] = (H)nd;
		last = o->nid;
	}
	for (size_t i = k; i < *num; i++) nodes[i] = 0;
	*num = k;
	END
}

EXPORT CUresult cuGraphNodeGetType(H hn, int *type) {
	if (!strict()) { if (type == NULL) return E_INVALID_VALUE; *type = (int)(hn & 15); return OK; }
	BEGIN("cuGraphNodeGetType");
	node_t *nd;
	if (type == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_node(FN, hn, &nd));
	*type = nd->type;
	END
}

// capture_begin makes s capture into g, appending: the capture's own graph
// (cuStreamBeginCapture) or the caller's (cuStreamBeginCaptureToGraph, after deps).
static void capture_begin(stream_t *s, graph_t *g, int to_graph, const H *deps, const CUgraphEdgeData *edges, size_t n) {
	capinfo_t *ci = calloc(1, sizeof *ci);
	if (ci == NULL) abort();
	ci->id = ++capture_seq;
	ci->to_graph = to_graph;
	ci->mark = g->tail;
	if (n) {
		ci->deps = malloc(n * sizeof *ci->deps);
		ci->edges = calloc(n, sizeof *ci->edges);
		if (ci->deps == NULL || ci->edges == NULL) abort();
		memcpy(ci->deps, deps, n * sizeof *ci->deps);
		if (edges) memcpy(ci->edges, edges, n * sizeof *ci->edges);
	}
	ci->ndeps = n;
	s->capture = g;
	s->capture_invalid = 0;
	s->cap = ci;
	g->capturing = s;
}

static void capture_end(stream_t *s) {
	capinfo_t *ci = s->cap;
	free(ci->deps);
	free(ci->edges);
	free(ci);
	s->cap = NULL;
	s->capture->capturing = NULL;
	s->capture = NULL;
}

// capturing reports whether g is being captured into by a live stream.
static int capturing(const graph_t *g) { return g->capturing && !g->capturing->h.dead; }

EXPORT CUresult cuStreamBeginCapture_v2(H hs, int mode) {
	if (!strict()) return OK;
	BEGIN("cuStreamBeginCapture_v2");
	ctx_t *c;
	stream_t *s;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	if (mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED) FAIL(E_INVALID_VALUE);
	if (s == LEGACY) FAIL(E_STREAM_CAPTURE_UNSUPPORTED);
	if (s->capture) FAIL(E_ILLEGAL_STATE);
	graph_t *g = h_new(H_GRAPH, c);
	if (g == NULL) FAIL(E_OUT_OF_MEMORY);
	capture_begin(s, g, 0, NULL, NULL, 0);
	END
}

// cuStreamBeginCaptureToGraph captures into the caller's graph, after its nodes: the
// first captured node depends on deps (nodes of g), as every node in the fake's
// order does.
EXPORT CUresult cuStreamBeginCaptureToGraph(H hs, H hg, const H *deps, const CUgraphEdgeData *edges, size_t n, int mode) {
	if (!strict()) return OK;
	BEGIN("cuStreamBeginCaptureToGraph");
	ctx_t *c;
	stream_t *s;
	graph_t *g;
	TRY(need_ctx(FN, &c));
	TRY(get_stream(FN, hs, &s));
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	if (mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED) FAIL(E_INVALID_VALUE);
	if (s == LEGACY) FAIL(E_STREAM_CAPTURE_UNSUPPORTED);
	if (s->capture || capturing(g)) FAIL(E_ILLEGAL_STATE);
	TRY(check_deps(FN, g, deps, edges, n));
	capture_begin(s, g, 1, deps, edges, n);
	END
}

// cuStreamEndCapture ends the capture: the graph (for cuStreamBeginCaptureToGraph,
// the caller's). An invalidated capture returns none: its own graph is destroyed,
// and the caller's loses what the capture added.
EXPORT CUresult cuStreamEndCapture(H hs, H *out) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuStreamEndCapture");
	stream_t *s;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	if (s == LEGACY || s->capture == NULL) FAIL(E_ILLEGAL_STATE);
	graph_t *g = s->capture;
	int to_graph = s->cap->to_graph;
	op_t *mark = s->cap->mark;
	capture_end(s);
	if (s->capture_invalid) {
		if (to_graph) {
			graph_truncate(g, mark);
		} else {
			graph_free_ops(g);
			h_kill(&g->h);
		}
		*out = 0;
		FAIL(E_STREAM_CAPTURE_INVALIDATED);
	}
	*out = (H)g;
	END
}

EXPORT CUresult cuStreamIsCapturing(H hs, int *status) {
	if (!strict()) { *status = 0; return OK; }
	BEGIN("cuStreamIsCapturing");
	stream_t *s;
	if (status == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_stream(FN, hs, &s));
	*status = s == LEGACY || s->capture == NULL ? CU_STREAM_CAPTURE_STATUS_NONE :
		s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	END
}

// capture_info answers the cuStreamGetCaptureInfo versions: the status (required),
// and while the capture is active its id, graph and dependencies: the last node
// captured (or added to the graph) since it began, else those it began with. The
// arrays stay valid until the stream's next call.
static CUresult capture_info(const char *FN, H hs, int *status, unsigned long long *id, H *graph, const H **deps,
	const CUgraphEdgeData **edges, size_t *n) {
	stream_t *s;
	CUresult r;
	if (status == NULL || (edges && deps == NULL)) return E_INVALID_VALUE;
	if ((r = get_stream(FN, hs, &s)) != OK) return r;
	if (s == LEGACY || s->capture == NULL) {
		*status = CU_STREAM_CAPTURE_STATUS_NONE;
		return OK;
	}
	if (s->capture_invalid) {
		*status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		return OK;
	}
	capinfo_t *ci = s->cap;
	graph_t *g = s->capture;
	const H *d = NULL;
	const CUgraphEdgeData *ed = NULL;
	size_t k = 0;
	if (g->tail != ci->mark) {
		node_t *last = node_of(g, g->tail);
		if (last == NULL) return E_OUT_OF_MEMORY;
		ci->last = (H)last;
		memset(&ci->last_edge, 0, sizeof ci->last_edge);
		d = &ci->last, ed = &ci->last_edge, k = 1;
	} else if (ci->ndeps) {
		d = ci->deps, ed = ci->edges, k = ci->ndeps;
	}
	if (deps && edges == NULL) {
		static const CUgraphEdgeData zero;
		for (size_t i = 0; i < k; i++)
			if (memcmp(&ed[i], &zero, sizeof zero) != 0) return E_LOSSY_QUERY;
	}
	*status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (id) *id = ci->id;
	if (graph) *graph = (H)g;
	if (deps) *deps = d;
	if (edges) *edges = ed;
	if (n) *n = k;
	return OK;
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(H hs, int *status, unsigned long long *id, H *graph, const H **deps,
	const CUgraphEdgeData **edges, size_t *n) {
	if (!strict()) { if (status == NULL) return E_INVALID_VALUE; *status = CU_STREAM_CAPTURE_STATUS_NONE; return OK; }
	BEGIN("cuStreamGetCaptureInfo_v3");
	r = capture_info(FN, hs, status, id, graph, deps, edges, n);
	END
}

// The entry points of older drivers: without edge data, and with the status and id only.
EXPORT CUresult cuStreamGetCaptureInfo_v2(H hs, int *status, unsigned long long *id, H *graph, const H **deps, size_t *n) {
	if (!strict()) { if (status == NULL) return E_INVALID_VALUE; *status = CU_STREAM_CAPTURE_STATUS_NONE; return OK; }
	BEGIN("cuStreamGetCaptureInfo_v2");
	r = capture_info(FN, hs, status, id, graph, deps, NULL, n);
	END
}

EXPORT CUresult cuStreamGetCaptureInfo(H hs, int *status, unsigned long long *id) {
	if (!strict()) { if (status == NULL) return E_INVALID_VALUE; *status = CU_STREAM_CAPTURE_STATUS_NONE; return OK; }
	BEGIN("cuStreamGetCaptureInfo");
	r = capture_info(FN, hs, status, id, NULL, NULL, NULL, NULL);
	END
}

EXPORT CUresult cuGraphCreate(H *out, unsigned flags) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuGraphCreate");
	ctx_t *c;
	if (out == NULL || flags) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	graph_t *g = h_new(H_GRAPH, c);
	if (g == NULL) FAIL(E_OUT_OF_MEMORY);
	*out = (H)g;
	END
}

EXPORT CUresult cuGraphInstantiateWithFlags(H *out, H hg, unsigned long long flags) {
	(void)flags;
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuGraphInstantiateWithFlags");
	ctx_t *c;
	graph_t *g;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	graph_t *e = h_new(H_EXEC, c);
	if (e == NULL) FAIL(E_OUT_OF_MEMORY);
	e->origin = g;
	for (op_t *o = g->head; o; o = o->next) graph_append(e, op_clone(o));
	*out = (H)e;
	END
}

/* ---------- conditional nodes ---------- */

// A condition (cuGraphConditionalHandleCreate): the graph and context it was made
// for, its default and flags, and its value. Kernels never run in the fake, so no
// cudaGraphSetConditional changes the value: a launch sets the conditions created
// with CU_GRAPH_COND_ASSIGN_DEFAULT to their default, and the others keep 0.
typedef struct {
	graph_t *g;
	ctx_t *c;
	unsigned def, flags, value;
} cond_t;
static cond_t *conds;
static size_t nconds, capconds;
#define COND_TAG 0xc0d0000000000000ull // handles are COND_TAG | (index + 1)
static uint64_t fast_conds;

static cond_t *get_cond(uint64_t h) {
	if ((h & 0xffff000000000000ull) != COND_TAG) return NULL;
	uint64_t i = (h & 0xffffffffffffull) - 1;
	return i < nconds ? &conds[i] : NULL;
}

// cond_free frees a conditional node's array of bodies (their graphs die with the
// graph that has the node: cond_kill_bodies) or its copies of their operations.
static void cond_free(op_t *o) {
	if (o->u.cd.lists) {
		for (unsigned i = 0; i < o->u.cd.size; i++) free_op_list(o->u.cd.lists[i], 0);
		free(o->u.cd.lists);
	}
	free(o->u.cd.bodies);
	o->u.cd.lists = NULL;
	o->u.cd.bodies = NULL;
}

// cond_clone gives c, a copy of conditional node o, copies of the operations of o's
// bodies (as instantiation copies them): later changes to the bodies do not show.
static void cond_clone(op_t *c, const op_t *o) {
	unsigned n = o->u.cd.size;
	c->u.cd.bodies = NULL;
	c->u.cd.lists = calloc(n ? n : 1, sizeof *c->u.cd.lists);
	if (c->u.cd.lists == NULL) abort();
	for (unsigned i = 0; i < n; i++) {
		const op_t *src = o->u.cd.bodies ? ((graph_t *)o->u.cd.bodies[i])->head : o->u.cd.lists[i];
		op_t **tail = &c->u.cd.lists[i];
		for (; src; src = src->next) {
			*tail = op_clone(src);
			tail = &(*tail)->next;
		}
	}
}

// cond_kill_bodies destroys the body graphs of conditional node o of a graph that
// is destroyed (or loses the node).
static void cond_kill_bodies(op_t *o) {
	if (o->u.cd.bodies == NULL) return;
	for (unsigned i = 0; i < o->u.cd.size; i++) {
		graph_t *b = (graph_t *)o->u.cd.bodies[i];
		if (capturing(b))
			violation("cuGraphDestroy", "destroy of conditional body graph %#lx while stream %#lx captures into it",
				(unsigned long)(uintptr_t)b, (unsigned long)(uintptr_t)b->capturing);
		graph_free_ops(b);
		h_kill(&b->h);
	}
}

// cond_assign_defaults sets the conditions that list's conditional nodes (nested
// ones too) test to their defaults, for those created with CU_GRAPH_COND_ASSIGN_DEFAULT.
static void cond_assign_defaults(const op_t *list) {
	for (const op_t *o = list; o; o = o->next) {
		if (o->type != OP_COND) continue;
		cond_t *k = get_cond(o->u.cd.cond);
		if (k && (k->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)) k->value = k->def;
		for (unsigned i = 0; i < o->u.cd.size; i++) cond_assign_defaults(o->u.cd.lists[i]);
	}
}

// cond_select returns the operations of the body that conditional node o (of an
// exec) runs, or NULL. A while node whose condition is set runs its body once: no
// kernel runs in the fake, so none could clear it, and once stands for a loop that a
// kernel ends.
static const op_t *cond_select(const op_t *o) {
	cond_t *k = get_cond(o->u.cd.cond);
	unsigned v = k ? k->value : 0, n = o->u.cd.size;
	switch (o->u.cd.type) {
	case CU_GRAPH_COND_TYPE_IF: return v ? o->u.cd.lists[0] : n == 2 ? o->u.cd.lists[1] : NULL;
	case CU_GRAPH_COND_TYPE_WHILE: return v ? o->u.cd.lists[0] : NULL;
	default: return v < n ? o->u.cd.lists[v] : NULL;
	}
}

EXPORT CUresult cuGraphConditionalHandleCreate(uint64_t *out, H hg, H hc, unsigned def, unsigned flags) {
	if (!strict()) {
		if (out == NULL) return E_INVALID_VALUE;
		*out = COND_TAG | __atomic_add_fetch(&fast_conds, 1, __ATOMIC_RELAXED);
		return OK;
	}
	BEGIN("cuGraphConditionalHandleCreate");
	graph_t *g;
	ctx_t *c;
	if (out == NULL || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT)) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	TRY(get_h(FN, hc, H_CTX, (void **)&c));
	if (g->h.ctx != c) FAIL(E_INVALID_VALUE);
	if (nconds == capconds) {
		size_t cap = capconds ? 2 * capconds : 64;
		cond_t *n = realloc(conds, cap * sizeof *n);
		if (n == NULL) FAIL(E_OUT_OF_MEMORY);
		conds = n, capconds = cap;
	}
	conds[nconds++] = (cond_t){.g = g, .c = c, .def = def, .flags = flags};
	*out = COND_TAG | nconds;
	END
}

// cuGraphAddNode_v2 adds conditional nodes (other node types are added through their
// own calls in the fake): size body graphs, empty, which the driver owns and which
// phGraph_out lists while the node lives. The condition must have been made for g or
// a graph around it, in the node's context.
EXPORT CUresult cuGraphAddNode_v2(H *out, H hg, const H *deps, const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p) {
	if (!strict()) {
		if (out == NULL || p == NULL) return E_INVALID_VALUE;
		if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
			unsigned k = p->conditional.size;
			H *b = calloc(k ? k : 1, sizeof *b); // never freed: the fast mode tracks nothing
			if (b == NULL) return E_OUT_OF_MEMORY;
			for (unsigned i = 0; i < k; i++) b[i] = fast_handle();
			p->conditional.phGraph_out = b;
		}
		*out = fast_node(p->type & 15);
		return OK;
	}
	BEGIN("cuGraphAddNode_v2");
	graph_t *g;
	ctx_t *c;
	if (out == NULL || p == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	TRY(check_deps(FN, g, deps, edges, n));
	if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) FAIL(E_NOT_SUPPORTED);
	if (p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2) FAIL(E_INVALID_VALUE);
	CUDA_CONDITIONAL_NODE_PARAMS *cp = &p->conditional;
	TRY(get_h(FN, cp->ctx, H_CTX, (void **)&c));
	cond_t *k = get_cond(cp->handle);
	if (k == NULL) FAIL(E_INVALID_VALUE);
	if (k->g->h.dead) {
		violation(FN, "condition %#llx of destroyed graph %#lx", (unsigned long long)cp->handle, (unsigned long)(uintptr_t)k->g);
		FAIL(E_INVALID_VALUE);
	}
	graph_t *a = g;
	while (a && a != k->g) a = a->parent;
	if (a == NULL || k->c != c) FAIL(E_INVALID_VALUE);
	unsigned size = cp->size;
	switch (cp->type) {
	case CU_GRAPH_COND_TYPE_IF: if (size < 1 || size > 2) FAIL(E_INVALID_VALUE); break;
	case CU_GRAPH_COND_TYPE_WHILE: if (size != 1) FAIL(E_INVALID_VALUE); break;
	case CU_GRAPH_COND_TYPE_SWITCH: if (size < 1) FAIL(E_INVALID_VALUE); break;
	default: FAIL(E_INVALID_VALUE);
	}
	if (arena_used + size + 1 > arena_slots) FAIL(E_OUT_OF_MEMORY); // the bodies and the node
	H *bodies = calloc(size, sizeof *bodies);
	if (bodies == NULL) FAIL(E_OUT_OF_MEMORY);
	for (unsigned i = 0; i < size; i++) {
		graph_t *b = h_new(H_GRAPH, c);
		b->parent = g;
		bodies[i] = (H)b;
	}
	op_t *o = op_new(OP_COND, FN);
	o->u.cd.bodies = bodies;
	o->u.cd.size = size;
	o->u.cd.type = cp->type;
	o->u.cd.cond = cp->handle;
	TRY(node_add(FN, g, CU_GRAPH_NODE_TYPE_CONDITIONAL, o, out));
	cp->phGraph_out = bodies;
	END
}

// launch_check checks that o's memory is live and its kernel loaded (violations),
// and reports whether it must be left out. A conditional node's bodies are checked
// whole, whichever the condition selects.
static int launch_check(const char *FN, const op_t *o) {
	int bad = 0;
	for (size_t i = 0; i < o->nrefs; i++) {
		int st = o->refs[i]->state;
		if (st == ST_FREED || st == ST_FREE_PENDING || st == ST_UNREG) {
			violation(FN, "graph launch uses %s memory (a %s from %s)", stname[st], opname[o->type], o->fn);
			bad = 1;
		}
	}
	if (o->type == OP_KERNEL && (o->u.k.f->h.dead || o->u.k.f->mod->h.dead))
		violation(FN, "graph launch of kernel %s of unloaded module %#lx (from %s)", o->u.k.f->name,
			(unsigned long)(uintptr_t)o->u.k.f->mod, o->fn);
	if (o->type == OP_COND)
		for (unsigned i = 0; i < o->u.cd.size; i++)
			for (const op_t *b = o->u.cd.lists[i]; b; b = b->next) bad |= launch_check(FN, b);
	return bad;
}

// launch_ops queues copies of the operations of list (an exec's, or a conditional
// body's) on s; a conditional node queues the body its condition selects.
static void launch_ops(const char *FN, ctx_t *c, stream_t *s, H hs, const op_t *list) {
	for (const op_t *o = list; o; o = o->next) {
		if (launch_check(FN, o) || o->type == OP_EMPTY) continue;
		if (o->type == OP_COND) {
			const op_t *body = cond_select(o);
			if (body) launch_ops(FN, c, s, hs, body);
			continue;
		}
		op_t *k = op_clone(o);
		if (k->type == OP_KERNEL) record_launch(k, hs, c);
		submit(c, s, k);
	}
}

// cuGraphLaunch queues copies of the exec's operations on s, checking their memory
// and kernels as the calls that made them did: an operation on memory that is no
// longer live is a violation, and is left out.
EXPORT CUresult cuGraphLaunch(H he, H hs) {
	if (!strict()) return OK;
	BEGIN("cuGraphLaunch");
	ctx_t *c;
	graph_t *e;
	stream_t *s;
	TRY(need_ctx(FN, &c));
	TRY(get_h(FN, he, H_EXEC, (void **)&e));
	TRY(get_stream(FN, hs, &s));
	if (s && s->capture) {
		s->capture_invalid = 1;
		FAIL(E_NOT_SUPPORTED);
	}
	cond_assign_defaults(e->head);
	launch_ops(FN, c, s, hs, e->head);
	END
}

EXPORT CUresult cuGraphDestroy(H hg) {
	if (!strict()) return OK;
	BEGIN("cuGraphDestroy");
	graph_t *g;
	hdr *h = h_at(hg);
	if (h && h->type == H_GRAPH && h->dead) {
		violation(FN, "graph %#lx destroyed twice", (unsigned long)hg);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	if (g->parent) {
		violation(FN, "destroy of graph %#lx, the body of a conditional node of graph %#lx", (unsigned long)hg,
			(unsigned long)(uintptr_t)g->parent);
		FAIL(E_INVALID_VALUE);
	}
	if (capturing(g)) {
		violation(FN, "destroy of graph %#lx while stream %#lx captures into it", (unsigned long)hg,
			(unsigned long)(uintptr_t)g->capturing);
		FAIL(E_ILLEGAL_STATE);
	}
	graph_free_ops(g);
	h_kill(&g->h);
	END
}

// cuGraphExecUpdate_v2 replaces the exec's operations with the graph's when they are
// the same kinds in the same order (and the same kernels), as the driver accepts an
// update of a graph captured from the same code with other arguments. The exec's
// operations stay those of the nodes it was instantiated from (for
// cuGraphExecKernelNodeSetParams).
EXPORT CUresult cuGraphExecUpdate_v2(H he, H hg, CUgraphExecUpdateResultInfo *info) {
	if (!strict()) return OK;
	BEGIN("cuGraphExecUpdate_v2");
	graph_t *e, *g;
	if (info == NULL) FAIL(E_INVALID_VALUE);
	memset(info, 0, sizeof *info);
	TRY(get_h(FN, he, H_EXEC, (void **)&e));
	TRY(get_h(FN, hg, H_GRAPH, (void **)&g));
	op_t *a = e->head, *b = g->head;
	int why = UPD_SUCCESS;
	for (; a && b; a = a->next, b = b->next) {
		if (a->type != b->type) { why = UPD_NODE_TYPE_CHANGED; break; }
		if (a->type == OP_KERNEL && a->u.k.f != b->u.k.f) { why = UPD_FUNCTION_CHANGED; break; }
	}
	if (why == UPD_SUCCESS && (a || b)) why = UPD_TOPOLOGY_CHANGED;
	if (why != UPD_SUCCESS) {
		info->result = why;
		if (b) info->errorNode = (H)node_of(g, b);
		FAIL(E_GRAPH_EXEC_UPDATE_FAILURE);
	}
	op_t *old = e->head;
	e->head = e->tail = NULL;
	e->n = 0;
	for (a = old, b = g->head; b; a = a->next, b = b->next) {
		op_t *k = op_clone(b);
		k->nid = a->nid;
		graph_append(e, k);
	}
	free_op_list(old, 0);
	END
}

// exec_kernel_set replaces the parameters of the exec's copy of kernel node hn (a
// node of the graph the exec was instantiated from, of the same function).
static CUresult exec_kernel_set(const char *FN, H he, H hn, const CUDA_KERNEL_NODE_PARAMS_v1 *p, H kern) {
	graph_t *e;
	node_t *nd;
	func_t *f;
	op_t *o, *prev = NULL, *k;
	CUresult r;
	if ((r = get_h(FN, he, H_EXEC, (void **)&e)) != OK) return r;
	if ((r = get_node(FN, hn, &nd)) != OK) return r;
	if (nd->type != CU_GRAPH_NODE_TYPE_KERNEL || nd->g != e->origin) return E_INVALID_VALUE;
	for (o = e->head; o && o->nid != nd->nid; prev = o, o = o->next) {
	}
	if (o == NULL || o->type != OP_KERNEL) return E_INVALID_VALUE;
	if ((r = node_func(FN, p, kern, &f)) != OK) return r;
	if (f != o->u.k.f) return E_INVALID_VALUE; // another kernel
	if ((r = node_kernel_op(FN, "kernel node update", f, p, &k)) != OK) return r;
	k->nid = o->nid;
	k->node = o->node;
	k->next = o->next;
	if (prev) prev->next = k;
	else e->head = k;
	if (e->tail == o) e->tail = k;
	op_free(o);
	return OK;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(H he, H hn, const CUDA_KERNEL_NODE_PARAMS *p) {
	if (!strict()) return p ? OK : E_INVALID_VALUE;
	BEGIN("cuGraphExecKernelNodeSetParams_v2");
	H kern;
	if (p == NULL) FAIL(E_INVALID_VALUE);
	CUDA_KERNEL_NODE_PARAMS_v1 v = kparams_v1(p, &kern);
	r = exec_kernel_set(FN, he, hn, &v, kern);
	END
}

// cuGraphExecKernelNodeSetParams is the entry point of drivers before CUDA 12.0.
EXPORT CUresult cuGraphExecKernelNodeSetParams(H he, H hn, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
	if (!strict()) return p ? OK : E_INVALID_VALUE;
	BEGIN("cuGraphExecKernelNodeSetParams");
	if (p == NULL) FAIL(E_INVALID_VALUE);
	r = exec_kernel_set(FN, he, hn, p, 0);
	END
}

EXPORT CUresult cuGraphExecDestroy(H he) {
	if (!strict()) return OK;
	BEGIN("cuGraphExecDestroy");
	graph_t *e;
	hdr *h = h_at(he);
	if (h && h->type == H_EXEC && h->dead) {
		violation(FN, "graph exec %#lx destroyed twice", (unsigned long)he);
		FAIL(E_INVALID_HANDLE);
	}
	TRY(get_h(FN, he, H_EXEC, (void **)&e));
	graph_free_ops(e);
	h_kill(&e->h);
	END
}

/* ---------- interprocess sharing: pools, their pointers, events ---------- */

// The fake shares within one process only (tests model the two processes in one):
// an exported pool's descriptor is a memfd naming the pool and the process, a
// pointer's export data and an event's handle name the allocation or the event.
// Importing one of another process fails with CUDA_ERROR_NOT_SUPPORTED. An imported
// pointer is a second mapping of the exporter's pages at another address, so that
// both sides see each other's writes; freeing the exporter's allocation while an
// import of it is live is a violation.

#define IPC_MAGIC 0x1bcfa4eu
typedef struct {
	uint32_t magic;
	int32_t pid;
	uint64_t handle; // the pool, allocation base or event
	uint64_t size;
	uint8_t pad[40];
} ipc_rec;
_Static_assert(sizeof(ipc_rec) == 64, "ipc_rec is CUmemPoolPtrExportData's and CUipcEventHandle's size");
typedef struct { ipc_rec r; } CUipcEventHandle;

static void ipc_put(void *out, uint64_t handle, uint64_t size) {
	ipc_rec r = {IPC_MAGIC, (int32_t)getpid(), handle, size, {0}};
	memcpy(out, &r, sizeof r);
}

// ipc_get checks a record made by ipc_put: not one at all is E_INVALID_VALUE, one of
// another process E_NOT_SUPPORTED (the fake's limit).
static CUresult ipc_get(const void *in, ipc_rec *r) {
	memcpy(r, in, sizeof *r);
	if (r->magic != IPC_MAGIC) return E_INVALID_VALUE;
	if (r->pid != (int32_t)getpid()) return E_NOT_SUPPORTED;
	return OK;
}

EXPORT CUresult cuMemPoolExportToShareableHandle(void *out, H hp, int type, unsigned long long flags) {
	if (!strict()) { if (out) *(int *)out = -1; return OK; }
	BEGIN("cuMemPoolExportToShareableHandle");
	pool_t *p;
	if (out == NULL || flags != 0) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !p->ipc_fd || p->src) FAIL(E_INVALID_VALUE);
	int fd = memfd_create("fakecuda-pool", MFD_CLOEXEC);
	if (fd < 0) FAIL(E_OUT_OF_MEMORY);
	ipc_rec rec;
	ipc_put(&rec, hp, 0);
	if (pwrite(fd, &rec, sizeof rec, 0) != (ssize_t)sizeof rec) {
		close(fd);
		FAIL(E_OUT_OF_MEMORY);
	}
	*(int *)out = fd;
	END
}

EXPORT CUresult cuMemPoolImportFromShareableHandle(H *out, void *handle, int type, unsigned long long flags) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuMemPoolImportFromShareableHandle");
	ctx_t *c;
	pool_t *src;
	ipc_rec rec;
	if (out == NULL || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	if (pread((int)(intptr_t)handle, &rec, sizeof rec, 0) != (ssize_t)sizeof rec) FAIL(E_INVALID_VALUE);
	TRY(ipc_get(&rec, &rec));
	hdr *h = h_at(rec.handle);
	if (h == NULL || h->type != H_POOL || h->dead) FAIL(E_INVALID_VALUE);
	src = (pool_t *)h;
	pool_t *p = pool_new(c, src->dev, MK_DEVICE);
	if (p == NULL) FAIL(E_OUT_OF_MEMORY);
	p->src = src;
	p->readable = src->readable;
	p->writable = src->writable;
	*out = (H)p;
	END
}

EXPORT CUresult cuMemPoolExportPointer(void *out, CUdeviceptr ptr) {
	if (!strict()) return OK;
	BEGIN("cuMemPoolExportPointer");
	if (out == NULL) FAIL(E_INVALID_VALUE);
	mem_t *m = mem_find((uintptr_t)ptr);
	if (m == NULL || m->base != ptr) FAIL(E_INVALID_VALUE);
	if (m->r.state != ST_LIVE) {
		violation(FN, "export of %s allocation %#lx (%s)", mkname[m->kind], (unsigned long)m->base, stname[m->r.state]);
		FAIL(E_INVALID_VALUE);
	}
	if (m->pool == NULL || !m->pool->ipc_fd || m->src) FAIL(E_INVALID_VALUE);
	ipc_put(out, ptr, m->size);
	END
}

EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr *out, H hp, void *data) {
	if (!strict()) { *out = fast_ptr(1); return OK; }
	BEGIN("cuMemPoolImportPointer");
	ctx_t *c;
	pool_t *p;
	ipc_rec rec;
	if (out == NULL || data == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(get_h(FN, hp, H_POOL, (void **)&p));
	if (p->src == NULL) FAIL(E_INVALID_VALUE);
	TRY(ipc_get(data, &rec));
	mem_t *m = mem_find((uintptr_t)rec.handle);
	if (m == NULL || m->base != rec.handle || m->pool != p->src) FAIL(E_INVALID_VALUE);
	if (m->r.state != ST_LIVE) {
		violation(FN, "import of exported allocation %#lx, %s", (unsigned long)m->base, stname[m->r.state]);
		FAIL(E_INVALID_VALUE);
	}
	if (m->mapped > va_end - va_next) FAIL(E_OUT_OF_MEMORY);
	uintptr_t base = va_next;
	if (mremap((void *)m->base, 0, m->mapped, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)base) == MAP_FAILED) FAIL(E_OUT_OF_MEMORY);
	va_next += m->mapped;
	mem_t *im = calloc(1, sizeof *im);
	if (nmems == capmems) {
		capmems = capmems ? capmems * 2 : 1024;
		mems = realloc(mems, capmems * sizeof *mems);
	}
	if (im == NULL || mems == NULL) abort();
	*im = (mem_t){.r = {ST_LIVE, 0}, .kind = MK_DEVICE, .api = API_ALLOC, .dev = m->dev, .ctx = c, .pool = p, .base = base,
		.size = m->size, .mapped = m->mapped, .cnext = c->mems, .src = m, .shared = 1};
	c->mems = im;
	mems[nmems++] = im;
	m->imports++;
	mem_live_n[MK_DEVICE]++;
	mem_live_b[MK_DEVICE] += (int64_t)im->size;
	allocs_total++;
	*out = base;
	END
}

EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *out, H he) {
	if (!strict()) return OK;
	BEGIN("cuIpcGetEventHandle");
	event_t *e;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(get_h(FN, he, H_EVENT, (void **)&e));
	if (!(e->flags & CU_EVENT_INTERPROCESS) || e->ipc_src) FAIL(E_INVALID_VALUE);
	ipc_put(out, he, 0);
	END
}

EXPORT CUresult cuIpcOpenEventHandle(H *out, CUipcEventHandle handle) {
	if (!strict()) { *out = fast_handle(); return OK; }
	BEGIN("cuIpcOpenEventHandle");
	ctx_t *c;
	ipc_rec rec;
	if (out == NULL) FAIL(E_INVALID_VALUE);
	TRY(need_ctx(FN, &c));
	TRY(ipc_get(&handle, &rec));
	hdr *h = h_at(rec.handle);
	if (h == NULL || h->type != H_EVENT) FAIL(E_INVALID_VALUE);
	if (h->dead) {
		violation(FN, "open of interprocess event %#lx, destroyed by its exporter", (unsigned long)rec.handle);
		FAIL(E_INVALID_VALUE);
	}
	event_t *src = (event_t *)h;
	event_t *e = h_new(H_EVENT, c);
	if (e == NULL) FAIL(E_OUT_OF_MEMORY);
	e->flags = src->flags;
	e->ipc_src = src;
	*out = (H)e;
	END
}
