// Package nvtx marks ranges and instants of a Go program for NVIDIA's tools (Nsight
// Systems, Nsight Compute with --nvtx, and any tool that implements NVTX's injection
// interface), without the NVTX headers or any library at build time.
//
// Ranges are start/end ranges (nvtxDomainRangeStartEx, nvtxDomainRangeEnd), not
// push/pop: a push/pop range belongs to an OS thread, and a goroutine moves between
// threads; a Range is a value that may end on any goroutine and any thread, so a
// range stays whole however its goroutine is scheduled. Around a function, in one line:
//
//	defer nvtx.Start("step", nvtx.Color(0xff76b900)).End()
//
// With no tool attached (NVTX_INJECTION64_PATH unset when the process starts, as it is
// outside a profiler) every call returns after one atomic load: the package loads
// nothing and calls no C. Under a tool, the first call loads the tool's injection
// library and hands it this package's function table, as NVTX's own headers do.
//
// Domains (NewDomain) keep a program's or a library's ranges apart in the tools;
// Default is NVTX's default domain. Names are registered with the domain once
// (nvtxDomainRegisterStringA) and passed as handles after that. Everything here is
// safe for concurrent use.
package nvtx

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*gonvtx_fn)(void);

// The export tables of NVTX's injection interface (nvtxDetail/nvtxTypes.h).
typedef struct {
	size_t struct_size;
	int (*GetModuleFunctionTable)(int module, gonvtx_fn*** out_table, unsigned int* out_size);
} gonvtx_etbl_callbacks;
typedef struct {
	size_t struct_size;
	uint32_t version;
	uint32_t reserved0;
	void (*SetInjectionNvtxVersion)(uint32_t version);
} gonvtx_etbl_version;

// nvtxEventAttributes_v2, as NVTX version 3 lays it out: 48 bytes.
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
} gonvtx_attrs;

enum {
	GONVTX_MODULES = 7, GONVTX_MAX_SLOTS = 16,
	GONVTX_CORE2 = 5,
	GONVTX_CORE2_MarkEx = 1, GONVTX_CORE2_RangeStartEx = 2, GONVTX_CORE2_RangeEnd = 3,
	GONVTX_CORE2_NameCategoryA = 8, GONVTX_CORE2_RegisterStringA = 10, GONVTX_CORE2_CreateA = 12,
};

// The size of each module's table (NVTX_CBID_<module>_SIZE): core, CUDA, OpenCL,
// CUDA runtime, core2, sync. Every module is offered, as NVTX's own headers offer
// them: Nsight Compute refuses to start when one is missing. Only core2's slots are
// ever called here.
static const unsigned int gonvtx_module_size[GONVTX_MODULES] = {0, 16, 9, 15, 7, 16, 7};

// The slots the tool fills, and the tables of pointers to them that it asks for
// (index 0 and the entry past the last are null, as in NVTX's own tables).
static gonvtx_fn gonvtx_slots[GONVTX_MODULES][GONVTX_MAX_SLOTS];
static gonvtx_fn* gonvtx_tables[GONVTX_MODULES][GONVTX_MAX_SLOTS + 1];
#define gonvtx_core2 gonvtx_slots[GONVTX_CORE2]

static int gonvtx_get_module_table(int module, gonvtx_fn*** out_table, unsigned int* out_size) {
	if (module < 1 || module >= GONVTX_MODULES) return 0;
	if (out_table) *out_table = gonvtx_tables[module];
	if (out_size) *out_size = gonvtx_module_size[module];
	return 1;
}

static void gonvtx_set_version(uint32_t v) { (void)v; }

static gonvtx_etbl_callbacks gonvtx_callbacks = {sizeof(gonvtx_etbl_callbacks), gonvtx_get_module_table};
static gonvtx_etbl_version gonvtx_version = {sizeof(gonvtx_etbl_version), 3, 0, gonvtx_set_version};

static const void* gonvtx_export_table(uint32_t id) {
	switch (id) {
	case 1: return &gonvtx_callbacks;
	case 3: return &gonvtx_version;
	}
	return NULL;
}

// gonvtx_init loads the injection library at path and lets it fill the slots; it
// returns 1 when the tool took the domain functions this package calls, else why
// not: -1 the library did not load, -2 it has no InitializeInjectionNvtx2, -3 that
// refused, -4 it left the range functions empty.
static int gonvtx_init(const char* path) {
	for (int m = 1; m < GONVTX_MODULES; m++)
		for (unsigned int i = 1; i < gonvtx_module_size[m]; i++) gonvtx_tables[m][i] = &gonvtx_slots[m][i];
	void* h = dlopen(path, RTLD_LAZY);
	if (h == NULL) return -1;
	int (*init)(const void* (*)(uint32_t)) = (int (*)(const void* (*)(uint32_t)))dlsym(h, "InitializeInjectionNvtx2");
	if (init == NULL) return -2;
	if (!init(gonvtx_export_table)) return -3;
	return gonvtx_core2[GONVTX_CORE2_RangeStartEx] && gonvtx_core2[GONVTX_CORE2_RangeEnd] ? 1 : -4;
}

static uintptr_t gonvtx_domain_create(const char* name) {
	gonvtx_fn f = gonvtx_core2[GONVTX_CORE2_CreateA];
	return f ? (uintptr_t)((void* (*)(const char*))f)(name) : 0;
}

static uintptr_t gonvtx_register(uintptr_t d, const char* s) {
	gonvtx_fn f = gonvtx_core2[GONVTX_CORE2_RegisterStringA];
	return f ? (uintptr_t)((void* (*)(void*, const char*))f)((void*)d, s) : 0;
}

static void gonvtx_name_category(uintptr_t d, uint32_t id, const char* s) {
	gonvtx_fn f = gonvtx_core2[GONVTX_CORE2_NameCategoryA];
	if (f) ((void (*)(void*, uint32_t, const char*))f)((void*)d, id, s);
}

// gonvtx_event fills the attributes of a range or mark named by a registered
// string handle.
static void gonvtx_event(gonvtx_attrs* a, uintptr_t name, uint32_t category, uint32_t color, int32_t payload_type, uint64_t payload) {
	memset(a, 0, sizeof *a);
	a->version = 3;
	a->size = sizeof *a;
	a->category = category;
	a->colorType = color ? 1 : 0;
	a->color = color;
	a->payloadType = payload_type;
	a->payload = payload;
	a->messageType = 3; // NVTX_MESSAGE_TYPE_REGISTERED
	a->message = (const void*)name;
}

static uint64_t gonvtx_range_start(uintptr_t d, uintptr_t name, uint32_t category, uint32_t color, int32_t pt, uint64_t payload) {
	gonvtx_attrs a;
	gonvtx_event(&a, name, category, color, pt, payload);
	return ((uint64_t (*)(void*, const gonvtx_attrs*))gonvtx_core2[GONVTX_CORE2_RangeStartEx])((void*)d, &a);
}

static void gonvtx_range_end(uintptr_t d, uint64_t id) {
	((void (*)(void*, uint64_t))gonvtx_core2[GONVTX_CORE2_RangeEnd])((void*)d, id);
}

static void gonvtx_mark(uintptr_t d, uintptr_t name, uint32_t category, uint32_t color, int32_t pt, uint64_t payload) {
	gonvtx_fn f = gonvtx_core2[GONVTX_CORE2_MarkEx];
	if (!f) return;
	gonvtx_attrs a;
	gonvtx_event(&a, name, category, color, pt, payload);
	((void (*)(void*, const gonvtx_attrs*))f)((void*)d, &a);
}
*/
import "C"

import (
	"math"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// state is whether a tool is attached: 0 not known yet, 1 none, 2 attached.
var state atomic.Int32

var initOnce sync.Once

// initResult is gonvtx_init's answer under a tool, for the tests.
var initResult int

// attached reports whether a tool took the calls, loading its injection library on
// the first call. The fast answer is one atomic load.
func attached() bool {
	switch state.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	initOnce.Do(func() {
		path := os.Getenv("NVTX_INJECTION64_PATH")
		if path == "" {
			state.Store(1)
			return
		}
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		if initResult = int(C.gonvtx_init(cpath)); initResult == 1 {
			state.Store(2)
		} else {
			state.Store(1)
		}
	})
	return state.Load() == 2
}

// Enabled reports whether a tool records this process's ranges.
func Enabled() bool { return attached() }

// Domain is a named group of ranges, marks and categories.
type Domain struct {
	name string
	once sync.Once
	h    C.uintptr_t
	mu   sync.Mutex
	strs map[string]C.uintptr_t // registered names
}

// Default is NVTX's default domain.
var Default = &Domain{}

var domains sync.Map // name → *Domain

// NewDomain returns the domain of that name, made on its first use (the same
// *Domain for every call with the name).
func NewDomain(name string) *Domain {
	if d, ok := domains.Load(name); ok {
		return d.(*Domain)
	}
	d, _ := domains.LoadOrStore(name, &Domain{name: name})
	return d.(*Domain)
}

// Name returns the domain's name ("" for Default).
func (d *Domain) Name() string { return d.name }

// handle returns the tool's handle of the domain (0: the default domain).
func (d *Domain) handle() C.uintptr_t {
	if d.name == "" {
		return 0
	}
	d.once.Do(func() {
		cname := C.CString(d.name)
		d.h = C.gonvtx_domain_create(cname)
		C.free(unsafe.Pointer(cname))
	})
	return d.h
}

// str returns the handle of name registered with the domain, registering it once.
func (d *Domain) str(h C.uintptr_t, name string) C.uintptr_t {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.strs[name]; ok {
		return s
	}
	cname := C.CString(name)
	s := C.gonvtx_register(h, cname)
	C.free(unsafe.Pointer(cname))
	if d.strs == nil {
		d.strs = map[string]C.uintptr_t{}
	}
	d.strs[name] = s
	return s
}

// Option sets an attribute of a range or mark.
type Option struct {
	kind    uint8
	u32     uint32
	payload uint64
	ptype   int32
}

const (
	optColor = iota + 1
	optCategory
	optPayload
)

// Color sets the ARGB color the tools draw the range or mark in (0xff76b900).
func Color(argb uint32) Option { return Option{kind: optColor, u32: argb} }

// Category sets the category (name it with Domain.NameCategory).
func Category(id uint32) Option { return Option{kind: optCategory, u32: id} }

// Payload attaches an integer to the range or mark.
func Payload(v int64) Option { return Option{kind: optPayload, payload: uint64(v), ptype: 2} }

// PayloadFloat attaches a float to the range or mark.
func PayloadFloat(v float64) Option {
	return Option{kind: optPayload, payload: math.Float64bits(v), ptype: 3}
}

type attrs struct {
	color, category uint32
	ptype           int32
	payload         uint64
}

func collect(opts []Option) attrs {
	var a attrs
	for _, o := range opts {
		switch o.kind {
		case optColor:
			a.color = o.u32
		case optCategory:
			a.category = o.u32
		case optPayload:
			a.ptype, a.payload = o.ptype, o.payload
		}
	}
	return a
}

// Range is a started range: End ends it, from any goroutine. The zero Range (what
// Start returns with no tool attached) ends as a no-op.
type Range struct {
	d  *Domain
	id uint64
}

// Start starts a range named name in the domain.
func (d *Domain) Start(name string, opts ...Option) Range {
	if !attached() {
		return Range{}
	}
	h := d.handle()
	a := collect(opts)
	id := C.gonvtx_range_start(h, d.str(h, name), C.uint32_t(a.category), C.uint32_t(a.color), C.int32_t(a.ptype), C.uint64_t(a.payload))
	return Range{d: d, id: uint64(id)}
}

// End ends the range.
func (r Range) End() {
	if r.d == nil {
		return
	}
	C.gonvtx_range_end(r.d.handle(), C.uint64_t(r.id))
}

// Mark marks an instant named name in the domain.
func (d *Domain) Mark(name string, opts ...Option) {
	if !attached() {
		return
	}
	h := d.handle()
	a := collect(opts)
	C.gonvtx_mark(h, d.str(h, name), C.uint32_t(a.category), C.uint32_t(a.color), C.int32_t(a.ptype), C.uint64_t(a.payload))
}

// NameCategory names category id in the domain.
func (d *Domain) NameCategory(id uint32, name string) {
	if !attached() {
		return
	}
	cname := C.CString(name)
	C.gonvtx_name_category(d.handle(), C.uint32_t(id), cname)
	C.free(unsafe.Pointer(cname))
}

// Start starts a range in the default domain.
func Start(name string, opts ...Option) Range { return Default.Start(name, opts...) }

// Mark marks an instant in the default domain.
func Mark(name string, opts ...Option) { Default.Mark(name, opts...) }
