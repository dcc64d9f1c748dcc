/* C side of the PMIx host: the server-module trampolines that hand every
 * library upcall to Go, and small helpers that build and read pmix_info_t
 * values, whose unions cgo cannot reach. Memory rules: arrays built here are
 * malloc'ed and freed with PMIX_INFO_FREE; data given to the library's
 * callbacks is released through the release functions defined here. */
#ifndef PRUN_PMIXSRV_SHIM_H
#define PRUN_PMIXSRV_SHIM_H

#include <stdint.h>
#include <stdlib.h>
#include "pin.h"
#include <pmix.h>
#include <pmix_server.h>

pmix_status_t prun_server_init(pmix_info_t *info, size_t ninfo);
uintptr_t prun_server_init_addr(void);

/* building info arrays */
pmix_info_t *prun_info_create(size_t n);
void prun_info_free(pmix_info_t *a, size_t n);
void prun_info_string(pmix_info_t *a, size_t i, const char *key, const char *v);
pmix_status_t prun_info_regex(pmix_info_t *a, size_t i, const char *key, const char *raw, int ppn);
void prun_info_bool(pmix_info_t *a, size_t i, const char *key, int v);
void prun_info_uint(pmix_info_t *a, size_t i, const char *key, uint64_t v, pmix_data_type_t t);
void prun_info_int(pmix_info_t *a, size_t i, const char *key, int64_t v, pmix_data_type_t t);
void prun_info_double(pmix_info_t *a, size_t i, const char *key, double v);
void prun_info_float(pmix_info_t *a, size_t i, const char *key, float v);
void prun_info_bytes(pmix_info_t *a, size_t i, const char *key, const char *b, size_t n);
void prun_info_proc(pmix_info_t *a, size_t i, const char *key, const char *ns, uint32_t rank);
void prun_info_infos(pmix_info_t *a, size_t i, const char *key, pmix_info_t *sub, size_t n);
pmix_proc_info_t *prun_procinfo_create(size_t n);
void prun_procinfo_set(pmix_proc_info_t *a, size_t i, const char *ns, uint32_t rank,
                       const char *host, const char *exe, int pid, int exit_code, int state);
void prun_info_procinfos(pmix_info_t *a, size_t i, const char *key, pmix_proc_info_t *arr, size_t n);
pmix_proc_t *prun_procs_create(size_t n);
void prun_procs_set(pmix_proc_t *a, size_t i, const char *ns, uint32_t rank);
void prun_info_procs(pmix_info_t *a, size_t i, const char *key, pmix_proc_t *arr, size_t n);
pmix_info_t *prun_info_at(pmix_info_t *a, size_t i);

/* reading values */
pmix_data_type_t prun_value_type(const pmix_value_t *v);
const char *prun_value_string(const pmix_value_t *v);
uint64_t prun_value_uint(const pmix_value_t *v);
int64_t prun_value_int(const pmix_value_t *v);
double prun_value_double(const pmix_value_t *v);
const char *prun_value_bytes(const pmix_value_t *v, size_t *n);
const pmix_proc_t *prun_value_proc(const pmix_value_t *v);
void *prun_value_darray(const pmix_value_t *v, pmix_data_type_t *t, size_t *n);

/* completing the library's requests */
void prun_op_cb(pmix_op_cbfunc_t cb, pmix_status_t st, void *cbdata);
void prun_modex_cb(pmix_modex_cbfunc_t cb, pmix_status_t st, const char *data, size_t n, void *cbdata);
void prun_info_cb(pmix_info_cbfunc_t cb, pmix_status_t st, pmix_info_t *info, size_t n, void *cbdata);
void prun_lookup_cb(pmix_lookup_cbfunc_t cb, pmix_status_t st, pmix_pdata_t *d, size_t n, void *cbdata);
void prun_spawn_cb(pmix_spawn_cbfunc_t cb, pmix_status_t st, const char *nspace, void *cbdata);
pmix_pdata_t *prun_pdata_create(size_t n);
void prun_pdata_set(pmix_pdata_t *d, size_t i, const char *ns, uint32_t rank, const char *key, pmix_info_t *val);
void prun_pdata_free(pmix_pdata_t *d, size_t n);

/* our own calls: registrations wait in C, the others complete through Go */
pmix_status_t prun_register_nspace(const char *ns, int nlocal, pmix_info_t *info, size_t n);
void prun_deregister_nspace(const char *ns);
size_t prun_release_departed(void);
void prun_nspace_registered(const char *ns);
void prun_nspace_forgotten(const char *ns);
void prun_register_clients(const char *ns, const uint32_t *ranks, size_t n, uid_t uid, gid_t gid, pmix_status_t *st);
void prun_deregister_client(const char *ns, uint32_t rank);
pmix_status_t prun_setup_fork(const char *ns, uint32_t rank, char ***env);
void prun_env_free(char **env);
pmix_status_t prun_dmodex_request(const char *ns, uint32_t rank, uintptr_t h);
pmix_status_t prun_notify(pmix_status_t code, const char *ns, uint32_t rank, pmix_data_range_t range,
                          pmix_info_t *info, size_t n, uintptr_t h);

/* libpmix's group trackers: timeouts and gone members (groups.c) */
void prun_group_upcall(void *trk, void *cb);
void prun_group_member_gone(const char *ns, uint32_t rank);
void prun_group_forget_nspace(const char *ns);
uint32_t prun_group_tracker_nlocal(void *trk);
void prun_group_keep_record(void *trk);

#endif
