/* strategies/xpass.h - the extracting strategies' kit moved to engine/xpass.h; this header
 * forwards to it for the strategy files that include it from here. */
#include "../xpass.h"
