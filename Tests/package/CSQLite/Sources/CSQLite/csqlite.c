#include "csqlite.h"

int csqlite_version_number(void) { return 3040000; }
