/* A C implementation of goldb.h for the golden package's call tests. */
#include <goldb.h>

static goldStatus_t last = GOLD_STATUS_SUCCESS;

goldbStatus goldbAttach(goldbCtx ctx, goldMode mode) {
    if (!ctx) return GOLDB_ERR_LOST;
    return mode == GOLD_MODE_NEG ? GOLDB_ERR_BUSY : GOLDB_OK;
}

goldbStatus goldbUse(goldCtx_t ctx, const goldDesc *desc, goldbPair pair) {
    last = GOLD_STATUS_INTERNAL_ERROR;
    if (desc->level != pair.mode || pair.p.x != 1.5f || pair.p.y != -2.5f || pair.addr != 0x123456789abcull)
        return GOLDB_ERR_BUSY;
    last = GOLD_STATUS_SUCCESS;
    return GOLDB_OK;
}

goldPoint goldbOrigin(goldbPair pair) {
    goldPoint p = {pair.p.x + (float)pair.mode, pair.p.y + (float)(pair.addr >> 32)};
    return p;
}

goldStatus_t goldbLastError(void) { return last; }
