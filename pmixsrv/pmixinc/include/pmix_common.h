/* See pmix_server.h beside this file. */
#include <pmix_common.h>
