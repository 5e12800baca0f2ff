/* golda.h: a small C API written for the generator's golden tests (not a real library).
 * Each declaration exercises one thing the generator must get right; gen/golden_test.go
 * compares the Go it generates with gen/internal/golden/golda. */
#ifndef GOLDA_H
#define GOLDA_H

#include <stddef.h>
#include <stdint.h>

/* Integer constants: plain, hex unsigned, negative, 64-bit, pointer-style. */
#define GOLDA_VERSION_MAJOR 3
#define GOLDA_MAX_NAME 32
#define GOLDA_FLAG_HIGH 0x80000000u
#define GOLDA_NEG (-5)
#define GOLDA_ALL_ONES 0xFFFFFFFFFFFFFFFFull
#define GOLDA_STREAM_LEGACY ((void *)1)
/* Floating-point constants: a float (its value as a float), doubles, a whole number. */
#define GOLDA_PI 3.25f
#define GOLDA_TENTH_F 0.1f
#define GOLDA_EPSILON 1e-5
#define GOLDA_ZERO 0.0
/* Not numeric constants: not emitted. */
#define GOLDA_NAME "golda"
#define GOLDA_SQUARE(x) ((x) * (x))
#define GOLDA_API(f) f

/* The status type: success is its nil value, every other value an error. */
typedef enum goldStatus_enum {
    GOLD_STATUS_SUCCESS = 0,
    GOLD_STATUS_NOT_INITIALIZED = 1,
    GOLD_STATUS_ALLOC_FAILED = 3,
    GOLD_STATUS_INVALID_VALUE = 7,
    GOLD_STATUS_INTERNAL_ERROR = 14,
    GOLD_STATUS_LAST = 14 /* duplicate value: a second sentinel, one description */
} goldStatus_t;

/* A signed enum: a negative value, duplicates and hex values. */
typedef enum goldMode_enum {
    GOLD_MODE_NEG = -1,
    GOLD_MODE_DEFAULT = 0,
    GOLD_MODE_FAST = 1,
    GOLD_MODE_FASTEST = 1,
    GOLD_MODE_HEX = 0x10,
    GOLD_MODE_NEXT, /* implicit: 0x11 */
    GOLD_MODE_MAX = 0x7fffffff
} goldMode;

/* An unsigned enum: a value above INT_MAX. */
typedef enum goldFlags_enum {
    GOLD_FLAG_NONE = 0x0,
    GOLD_FLAG_A = 0x1,
    GOLD_FLAG_B = 0x2,
    GOLD_FLAG_TOP = 0x80000000u
} goldFlags;

/* A typedef chain: the unsuffixed name wins, the _v2 name is an alias. */
typedef unsigned long long goldptr_v2;
typedef goldptr_v2 goldptr;

/* An opaque handle with a resource row (goldCreate / goldDestroy). */
typedef struct goldCtx_st *goldCtx_t;

/* A handle whose resource row names a handwritten type (handwritten = "Queue"): no
 * owner type is generated for it. */
typedef struct goldQueue_st *goldQueue_t;

/* A function pointer type, used as a parameter and as a struct field. */
typedef void (*goldCallback)(void *userData, goldStatus_t status);

/* A small struct passed and returned by value. */
typedef struct goldPoint_st {
    float x;
    float y;
} goldPoint;

/* A struct with a nested union, bit fields, nested anonymous structs, an array field,
 * a function pointer, a typedef-chain field and a const struct pointer. */
typedef struct goldDesc_st {
    int kind;
    union {
        int i;
        float f;
        double d;
        unsigned char bytes[8];
    } value;
    unsigned int ready : 1;
    unsigned int flags : 3;
    signed int level : 5;   /* crosses a byte boundary */
    unsigned int : 2;       /* unnamed padding bits */
    unsigned int wide : 25; /* does not fit in the int's last 21 bits: starts a new unit */
    int delta : 7;          /* plain int bit field: signed with GCC */
    unsigned long long lo : 12;
    unsigned long long big : 40; /* spans six bytes of a 64-bit unit */
    unsigned char tail : 4;
    unsigned int : 0; /* zero width: the next bit field starts a new int */
    unsigned short last : 3;
    struct {
        short a;
        short b;
    } inner;
    struct { /* C11 anonymous member */
        int x;
        int y;
    };
    char name[GOLDA_MAX_NAME];
    goldCallback cb;
    goldptr addr;
    const struct goldPoint_st *origin;
    goldMode mode;
} goldDesc;

/* Resource functions. */
goldStatus_t goldCreate(goldCtx_t *ctx);
goldStatus_t goldDestroy(goldCtx_t ctx);
goldStatus_t goldQueueCreate(goldQueue_t *queue);
goldStatus_t goldQueueDestroy(goldQueue_t queue);

/* A _v2 ABI behind its plain name: bound as Foo. Const pointers of several kinds. */
#define goldFoo goldFoo_v2
goldStatus_t goldFoo(goldCtx_t ctx, const char *name, const float *x, void **out);

/* Two distinct functions: Bar and BarV2. */
goldStatus_t goldBar(goldCtx_t ctx, int n);
goldStatus_t goldBar_v2(goldCtx_t ctx, int64_t n, goldFlags flags);

/* 32- and 64-bit integer variants: Scale and Scale64. */
goldStatus_t goldScale(goldCtx_t ctx, int n, float alpha, float *x);
goldStatus_t goldScale_64(goldCtx_t ctx, int64_t n, float alpha, float *x);

/* Function pointers: typedef'd and written out. Parameter names that are Go keywords. */
goldStatus_t goldSetCallback(goldCtx_t ctx, goldCallback cb, void *userData);
goldStatus_t goldForEach(goldCtx_t ctx, void (*fn)(int index, void *arg), void *arg, int type, int len);

/* Structs through pointers, const and not. */
goldStatus_t goldDescribe(goldCtx_t ctx, const struct goldDesc_st *desc, goldDesc *out);
goldStatus_t goldGetAddr(goldCtx_t ctx, goldptr *addr, goldptr_v2 base);
goldStatus_t goldSetMode(goldCtx_t ctx, goldMode mode, goldMode *previous);

/* Structs by value, in and out; results that are not a status. */
float goldDot(goldPoint a, goldPoint b);
goldPoint goldMid(goldPoint a, goldPoint b);
const char *goldGetErrorString(goldStatus_t status);
size_t goldGetWorkspaceSize(goldCtx_t ctx);
unsigned char goldChecksum(const void *data, size_t n);
void goldReset(void);

/* Excluded (variadic), with its reason in golda.toml. */
int goldLog(const char *format, ...);

/* Static inline helpers are not library symbols: not bound. */
static inline int goldSquare(int x) { return x * x; }

/* Qualifiers cc keeps in no type: the prototype test must spell them. */
goldStatus_t goldNames(goldCtx_t ctx, const char *const names[], int n, const float *const *rows);

/* Macro aliases, after the declarations they name. The name of another function in C
 * becomes a Go function too (Quick, Fast through a macro of one parameter), unless a
 * binding has that Go name (goldScale64: Scale64) or the target is not bound (goldLog). */
#define goldQuick goldBar_v2
#define goldFast GOLDA_API(goldScale_64)
#define goldScale64 goldScale
#define goldPrint goldLog

#endif
