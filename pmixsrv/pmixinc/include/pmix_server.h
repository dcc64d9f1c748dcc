/* libpmix's devel headers (src/...) name the public ones as
 * "include/NAME.h", their place in libpmix's source tree; installed, the
 * public headers are on pkg-config's include path itself. This forwards. */
#include <pmix_server.h>
