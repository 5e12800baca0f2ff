/* goldb.h: a second library for the golden tests, using golda's types. */
#ifndef GOLDB_H
#define GOLDB_H

#include <golda.h>

#define GOLDB_VERSION 2
#define GOLDB_DEFAULT_MODE GOLD_MODE_FAST

/* A typedef of another package's handle: an alias of golda.GoldCtx. */
typedef goldCtx_t goldbCtx;

/* An anonymous enum behind a typedef: the status type. */
typedef enum {
    GOLDB_OK = 0,
    GOLDB_ERR_BUSY = 1,
    GOLDB_ERR_LOST = 2
} goldbStatus;

/* A struct whose fields are golda types. */
typedef struct goldbPair_st {
    goldMode mode;
    goldPoint p;
    goldptr addr;
    goldCallback cb;
} goldbPair;

goldbStatus goldbAttach(goldbCtx ctx, goldMode mode);
goldbStatus goldbUse(goldCtx_t ctx, const goldDesc *desc, goldbPair pair);
goldPoint goldbOrigin(goldbPair pair);
goldStatus_t goldbLastError(void);

#endif
