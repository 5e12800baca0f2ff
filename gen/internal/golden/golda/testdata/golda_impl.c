/* A C implementation of golda.h for the golden package's call tests: it is compiled
 * into a shared library at test time and loaded through $GOCUDA_GOLDA_LIB. */
#include <stdlib.h>
#include <string.h>
#include <golda.h>

struct goldCtx_st {
    goldMode mode;
    goldCallback cb;
    goldptr addr;
};

struct goldQueue_st {
    int depth;
};

static int live; /* contexts and queues created and not destroyed */
static int resets;

goldStatus_t goldCreate(goldCtx_t *ctx) {
    if (!ctx) return GOLD_STATUS_INVALID_VALUE;
    *ctx = calloc(1, sizeof **ctx);
    if (!*ctx) return GOLD_STATUS_ALLOC_FAILED;
    live++;
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldDestroy(goldCtx_t ctx) {
    if (!ctx) return GOLD_STATUS_NOT_INITIALIZED;
    free(ctx);
    live--;
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldQueueCreate(goldQueue_t *queue) {
    if (!queue) return GOLD_STATUS_INVALID_VALUE;
    *queue = calloc(1, sizeof **queue);
    if (!*queue) return GOLD_STATUS_ALLOC_FAILED;
    live++;
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldQueueDestroy(goldQueue_t queue) {
    if (!queue) return GOLD_STATUS_NOT_INITIALIZED;
    free(queue);
    live--;
    return GOLD_STATUS_SUCCESS;
}

/* goldFoo_v2: writes strlen(name) + x[0] into out[0] as a pointer-sized integer. */
goldStatus_t goldFoo_v2(goldCtx_t ctx, const char *name, const float *x, void **out) {
    if (!ctx || !name || !x || !out) return GOLD_STATUS_INVALID_VALUE;
    *out = (void *)(uintptr_t)(strlen(name) + (size_t)x[0]);
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldBar(goldCtx_t ctx, int n) { return n < 0 ? GOLD_STATUS_INVALID_VALUE : GOLD_STATUS_SUCCESS; }

goldStatus_t goldBar_v2(goldCtx_t ctx, int64_t n, goldFlags flags) {
    return (n == -((int64_t)1 << 40) && flags == GOLD_FLAG_TOP) ? GOLD_STATUS_SUCCESS : GOLD_STATUS_INTERNAL_ERROR;
}

goldStatus_t goldScale(goldCtx_t ctx, int n, float alpha, float *x) {
    for (int i = 0; i < n; i++) x[i] *= alpha;
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldScale_64(goldCtx_t ctx, int64_t n, float alpha, float *x) {
    for (int64_t i = 0; i < n; i++) x[i] *= alpha;
    return GOLD_STATUS_SUCCESS;
}

/* goldSetCallback calls cb at once and keeps only cb (userData may be Go memory). */
goldStatus_t goldSetCallback(goldCtx_t ctx, goldCallback cb, void *userData) {
    ctx->cb = cb;
    if (cb) cb(userData, GOLD_STATUS_ALLOC_FAILED);
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldForEach(goldCtx_t ctx, void (*fn)(int index, void *arg), void *arg, int type, int len) {
    for (int i = 0; i < len; i++) fn(i * type, arg);
    return GOLD_STATUS_SUCCESS;
}

/* Callbacks the tests pass back in: they sum into an int64_t. */
void goldImplRecord(void *userData, goldStatus_t status) { *(int64_t *)userData += 1000 + status; }
void goldImplSum(int index, void *arg) { *(int64_t *)arg += index; }

/* goldDescribe copies desc to out, then sets out's bit fields from desc's plain fields,
 * so the tests read C-written bit fields through the Go getters. */
goldStatus_t goldDescribe(goldCtx_t ctx, const struct goldDesc_st *desc, goldDesc *out) {
    *out = *desc;
    out->ready = desc->kind & 1;
    out->flags = desc->kind;
    out->level = -desc->kind;
    out->wide = desc->inner.a * 1000;
    out->delta = -desc->inner.b;
    out->lo = desc->x;
    out->big = (unsigned long long)desc->y * 1000003ull;
    out->tail = desc->kind + 1;
    out->last = desc->kind + 2;
    out->name[0] = 'C';
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldGetAddr(goldCtx_t ctx, goldptr *addr, goldptr_v2 base) {
    *addr = base + 0x100000000ull;
    return GOLD_STATUS_SUCCESS;
}

goldStatus_t goldSetMode(goldCtx_t ctx, goldMode mode, goldMode *previous) {
    if (previous) *previous = ctx->mode;
    ctx->mode = mode;
    return GOLD_STATUS_SUCCESS;
}

float goldDot(goldPoint a, goldPoint b) { return a.x * b.x + a.y * b.y; }

goldPoint goldMid(goldPoint a, goldPoint b) {
    goldPoint m = {(a.x + b.x) / 2, (a.y + b.y) / 2};
    return m;
}

const char *goldGetErrorString(goldStatus_t status) {
    switch (status) {
    case GOLD_STATUS_SUCCESS: return "no error";
    case GOLD_STATUS_ALLOC_FAILED: return "allocation failed";
    default: return "other error";
    }
}

/* With a NULL ctx: the number of live contexts and queues, for the resource tests. */
size_t goldGetWorkspaceSize(goldCtx_t ctx) { return ctx ? ((size_t)1 << 33) + ctx->mode : (size_t)live; }

/* With NULL data: the number of goldReset calls. */
unsigned char goldChecksum(const void *data, size_t n) {
    if (!data) return (unsigned char)resets;
    unsigned char s = 0;
    for (size_t i = 0; i < n; i++) s += ((const unsigned char *)data)[i];
    return s;
}

void goldReset(void) { resets++; }
