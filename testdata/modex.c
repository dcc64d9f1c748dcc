/*
 * modex.c - a PMIx client (not an MPI program) for jobs across nodes: every
 * rank puts a key naming itself and its host, commits, and then
 *   MODEX_MODE=collect (default): fences with PMIX_COLLECT_DATA (an allgather
 *                                 of every node's data through the launcher)
 *   MODEX_MODE=direct:            fences without data, so each get of another
 *                                 node's key is a direct-modex request routed
 *                                 to the daemon hosting that rank
 * and reads the key of every other rank, checking its value. It also reads
 * PMIX_HOSTNAME of its own and of the next rank.
 *
 * Output: "modex: rank R on HOST ok (N peers, next on HOST2)" and exit 0, or
 * one line per failure on stderr and exit 1.
 *
 * Build: gcc -O2 -Wall modex.c $(pkg-config --cflags --libs pmix)
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

static int fail(const char *what, pmix_status_t rc)
{
	fprintf(stderr, "modex: rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
	return 1;
}

int main(void)
{
	pmix_status_t rc;
	pmix_value_t val, *v = NULL;
	pmix_proc_t wild, peer;
	char host[256], mine[512];
	int errors = 0;
	const char *mode = getenv("MODEX_MODE");
	int direct = mode && strcmp(mode, "direct") == 0;

	alarm(60);
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS)
		return fail("PMIx_Init", rc);
	gethostname(host, sizeof host);
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v)) != PMIX_SUCCESS)
		return fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
	uint32_t size = v->data.uint32;
	PMIX_VALUE_RELEASE(v);

	snprintf(mine, sizeof mine, "rank %u on %s", me.rank, host);
	PMIX_VALUE_LOAD(&val, mine, PMIX_STRING);
	if ((rc = PMIx_Put(PMIX_GLOBAL, "modex.who", &val)) != PMIX_SUCCESS)
		return fail("PMIx_Put", rc);
	PMIX_VALUE_DESTRUCT(&val);
	if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
		return fail("PMIx_Commit", rc);

	pmix_info_t info;
	bool collect = !direct;
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	if ((rc = PMIx_Fence(&wild, 1, &info, 1)) != PMIX_SUCCESS)
		return fail("PMIx_Fence", rc);

	char nexthost[256] = "?";
	for (uint32_t r = 0; r < size; r++) {
		if (r == me.rank)
			continue;
		PMIX_LOAD_PROCID(&peer, me.nspace, r);
		if ((rc = PMIx_Get(&peer, "modex.who", NULL, 0, &v)) != PMIX_SUCCESS) {
			fprintf(stderr, "modex: rank %u: get modex.who of rank %u: %s\n", me.rank, r, PMIx_Error_string(rc));
			errors++;
			continue;
		}
		char want[32];
		snprintf(want, sizeof want, "rank %u on ", r);
		if (v->type != PMIX_STRING || strncmp(v->data.string, want, strlen(want)) != 0) {
			fprintf(stderr, "modex: rank %u: rank %u's modex.who is \"%s\"\n", me.rank, r,
				v->type == PMIX_STRING ? v->data.string : "(not a string)");
			errors++;
		} else if (r == (me.rank + 1) % size) {
			snprintf(nexthost, sizeof nexthost, "%s", v->data.string + strlen(want));
		}
		PMIX_VALUE_RELEASE(v);
	}
	/* PMIX_HOSTNAME of the next rank: the name the launcher knows its node by. */
	PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
	if ((rc = PMIx_Get(&peer, PMIX_HOSTNAME, NULL, 0, &v)) != PMIX_SUCCESS) {
		fprintf(stderr, "modex: rank %u: PMIX_HOSTNAME of the next rank: %s\n", me.rank, PMIx_Error_string(rc));
		errors++;
	} else {
		if (v->type != PMIX_STRING || strcmp(v->data.string, nexthost) != 0) {
			fprintf(stderr, "modex: rank %u: next rank's PMIX_HOSTNAME %s, its key says %s\n", me.rank,
				v->type == PMIX_STRING ? v->data.string : "?", nexthost);
			errors++;
		}
		PMIX_VALUE_RELEASE(v);
	}
	/* Everyone finishes the gets before anyone finalizes. */
	PMIx_Fence(&wild, 1, NULL, 0);
	if (errors == 0)
		printf("modex: rank %u on %s ok (%u peers, next on %s)\n", me.rank, host, size - 1, nexthost);
	PMIx_Finalize(NULL, 0);
	return errors ? 1 : 0;
}
