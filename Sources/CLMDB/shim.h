#ifndef PURCHASE_LEDGER_CLMDB_SHIM_H
#define PURCHASE_LEDGER_CLMDB_SHIM_H

// Debian's liblmdb-dev installs lmdb.h in the default include path.
#include <lmdb.h>

#endif
