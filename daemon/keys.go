package daemon

import (
	"strconv"
	"strings"

	"prun/jobspec"
	"prun/mapper"
	"prun/pmixsrv"
	"prun/sessiondir"
)

// Version is prun's version, reported as PMIX_RM_VERSION.
var Version = "0.1.0"

// nspaceInfo builds the info array for PMIx_server_register_nspace: every
// reserved key of the reserved-keys chapter that prun can know, grouped by
// realm — session and job keys at the top level, one PMIX_APP_INFO_ARRAY per
// app, one PMIX_NODE_INFO_ARRAY per node and one PMIX_PROC_INFO_ARRAY per
// process. self is the node this daemon runs on.
func nspaceInfo(p *Plan, sess *sessiondir.Dir, self int) []pmixsrv.Info {
	m := p.Map
	psets := Psets(p)
	type I = pmixsrv.Info
	nodeNames := make([]string, len(m.Nodes))
	perNode := make([]string, len(m.Nodes))
	for i, n := range m.Nodes {
		nodeNames[i] = n.Name
		perNode[i] = joinInts(n.Procs)
	}
	nodeList := strings.Join(nodeNames, ",")
	nprocs := len(m.Procs)
	info := []I{
		// session realm
		kv(pmixsrv.KeySessionID, uint32(0)),
		kv(pmixsrv.KeyTmpDir, sess.Top),
		kv(pmixsrv.KeyTdirRmclean, true),
		kv(pmixsrv.KeyRMName, "prun"),
		kv(pmixsrv.KeyRMVersion, Version),
		kv(pmixsrv.KeyHostnameKeepFqdn, true),
		// job realm
		kv(pmixsrv.KeyJobID, p.JobID),
		kv(pmixsrv.KeyJobSize, uint32(nprocs)),
		kv(pmixsrv.KeyJobNumApps, uint32(len(m.Apps))),
		kv(pmixsrv.KeyMaxProcs, uint32(max(p.UnivSize, nprocs))),
		kv(pmixsrv.KeyNumSlots, uint32(m.Slots)),
		kv(pmixsrv.KeyNumNodes, uint32(len(m.Nodes))),
		kv(pmixsrv.KeyNodeList, nodeList),
		kv(pmixsrv.KeyAllocatedNodelist, nodeList),
		kv(pmixsrv.KeyNumAllocatedNodes, uint32(len(m.Nodes))),
		kv(pmixsrv.KeyNodeMap, pmixsrv.NodeMap(nodeList)),
		kv(pmixsrv.KeyNodeMapRaw, nodeList),
		kv(pmixsrv.KeyProcMap, pmixsrv.ProcMap(strings.Join(perNode, ";"))),
		kv(pmixsrv.KeyProcMapRaw, strings.Join(perNode, ";")),
		kv(pmixsrv.KeyANLMap, ANLMap(p)),
		kv(pmixsrv.KeyCmdLine, p.Job.CmdLine),
		kv(pmixsrv.KeyNSDir, sess.NSDir(p.Nspace)),
		kv(pmixsrv.KeyNprocOffset, pmixsrv.Rank(0)),
	}
	if p.UnivSize != jobspec.UnivInfinite {
		info = append(info, kv(pmixsrv.KeyUnivSize, uint32(p.UnivSize)))
	}
	if p.Parent != nil {
		info = append(info, kv(pmixsrv.KeyParentID, *p.Parent))
	}
	if p.DebugStop {
		info = append(info, kv(pmixsrv.KeyDebugStopInInit, pmixsrv.Rank(pmixsrv.RankWildcard)))
	}
	// The local node's facts also at the top level: Open MPI looks for its
	// peers there, and libpmix 4.2 answers node-realm PMIX_HOSTNAME and
	// PMIX_NODEID only from there (in a node array they only identify it).
	if self >= 0 && self < len(m.Nodes) {
		n := m.Nodes[self]
		info = append(info,
			kv(pmixsrv.KeyHostname, n.Name),
			kv(pmixsrv.KeyNodeID, uint32(self)),
			kv(pmixsrv.KeyLocalPeers, joinInts(n.Procs)),
			kv(pmixsrv.KeyLocalSize, uint32(len(n.Procs))),
			kv(pmixsrv.KeyLocalLdr, pmixsrv.Rank(n.Procs[0])),
		)
	}
	for a, app := range m.Apps {
		ja := p.Job.Apps[a]
		appNodes := map[int]bool{}
		for r := app.Offset; r < app.Offset+app.Size; r++ {
			appNodes[m.Procs[r].Node] = true
		}
		ai := []I{
			kv(pmixsrv.KeyAppNum, uint32(a)),
			kv(pmixsrv.KeyAppSize, uint32(app.Size)),
			kv(pmixsrv.KeyAppLdr, pmixsrv.Rank(app.Offset)),
			kv(pmixsrv.KeyAppArgv, jobspec.ArgvString(ja.Argv)),
			kv(pmixsrv.KeyWDir, ja.Wdir),
			kv(pmixsrv.KeyMaxProcs, uint32(app.Size)),
			kv(pmixsrv.KeyNumNodes, uint32(len(appNodes))),
		}
		// a 5.x client looks a process's PMIX_PSET_NAME up in its app's
		// realm; a 4.2 client in the process's own data (procInfo)
		if psets != nil {
			ai = append(ai, kv(pmixsrv.KeyPsetName, psets[a]))
		}
		info = append(info, kv(pmixsrv.KeyAppInfoArray, ai))
	}
	for i, n := range m.Nodes {
		var local []I
		if i == self {
			// Bindings of the local peers, in PMIX_LOCAL_PEERS order.
			sets := make([]string, len(n.Procs))
			for j, r := range n.Procs {
				sets[j] = "UNBOUND"
				if cpus := m.Procs[r].CPUs; len(cpus) > 0 {
					sets[j] = strings.TrimPrefix(pmixsrv.CPUSetString(cpus), "hwloc:")
				}
			}
			local = append(local, kv(pmixsrv.KeyLocalCPUSets, strings.Join(sets, ":")))
		}
		// PMIX_LOCAL_PEERS, PMIX_LOCALLDR and PMIX_LOCAL_SIZE of every
		// node are not given here: libpmix derives the three from
		// PMIX_NODE_MAP and PMIX_PROC_MAP (gds/hash's store_map, 4.2.2) into
		// the same node's record, with the same values and types, whatever
		// the node arrays held (it replaces them). Given again, they cost
		// every daemon three pmix_info_t (544 bytes each) per node of the
		// job while it registers.
		info = append(info, kv(pmixsrv.KeyNodeInfoArray, append([]I{
			kv(pmixsrv.KeyNodeID, uint32(i)),
			kv(pmixsrv.KeyHostname, n.Name),
			kv(pmixsrv.KeyNodeSize, uint32(len(n.Procs))),
			kv(pmixsrv.KeyNodeOversubscribed, m.Oversubscribed(i)),
		}, local...)))
	}
	for _, pr := range m.Procs {
		info = append(info, kv(pmixsrv.KeyProcInfoArray, procInfo(p, sess, self, pr)))
	}
	return info
}

// procInfo is one rank's PMIX_PROC_INFO_ARRAY. Every daemon registers every
// rank of the job, so what a rank on another node gets is what each daemon
// holds per node of the job (libpmix's store, and while registering 544
// bytes of pmix_info_t a key): only what a client may ask of a remote peer.
//
// For every rank: its rank, app number, app rank, local and node ranks and
// node id (what PRRTE registers for every proc too, and MPICH's PMIx client
// asks each peer's PMIX_NODEID); PMIX_APP_SIZE, PMIX_APPLDR and
// PMIX_APP_ARGV, because the standard's first way to ask an app-realm key
// is by the rank of any process of the app, with no qualifier (PMIx v2
// 5.1.5.3), and libpmix 4.2.2 answers that from that rank's own data alone
// (testdata/keys.c asks it of every rank, on every node); PMIX_PSET_NAME,
// its app's process set (Psets), which Open MPI 5 asks of every rank of its
// job to build a group of a process set (MPI_Group_from_session_pset).
// PMIX_HOSTNAME
// of every rank libpmix derives from the node and process maps (store_map).
//
// For this node's ranks only: PMIX_GLOBAL_RANK, PMIX_REINCARNATION,
// PMIX_WDIR (a non-specific key, whose app value the app arrays hold),
// PMIX_HOSTNAME (derived anyway; kept as it was), PMIX_PROCDIR, the local
// node's sizes and peers (a node-realm key asked by the rank of a process on
// the node, no qualifier (5.1.5.5): libpmix 4.2.2 answers a local rank's
// from its data, another node's by host name from the node arrays),
// PMIX_CPUSET and PMIX_LOCALITY_STRING (Open MPI 4.1 reads its local peers'
// alone: ess/pmi). A remote rank's such keys are NOT-FOUND.
func procInfo(p *Plan, sess *sessiondir.Dir, self int, pr mapper.Proc) []pmixsrv.Info {
	m := p.Map
	psets := Psets(p)
	type I = pmixsrv.Info
	app := m.Apps[pr.App]
	pi := []I{
		kv(pmixsrv.KeyRank, pmixsrv.Rank(pr.Rank)),
		kv(pmixsrv.KeyAppNum, uint32(pr.App)),
		kv(pmixsrv.KeyAppRank, pmixsrv.Rank(pr.AppRank)),
		kv(pmixsrv.KeyLocalRank, uint16(pr.LocalRank)),
		kv(pmixsrv.KeyNodeRank, uint16(pr.NodeRank)),
		kv(pmixsrv.KeyNodeID, uint32(pr.Node)),
		kv(pmixsrv.KeyAppSize, uint32(app.Size)),
		kv(pmixsrv.KeyAppLdr, pmixsrv.Rank(app.Offset)),
		kv(pmixsrv.KeyAppArgv, jobspec.ArgvString(p.Job.Apps[pr.App].Argv)),
	}
	if psets != nil {
		pi = append(pi, kv(pmixsrv.KeyPsetName, psets[pr.App]))
	}
	if p.Parent != nil {
		pi = append(pi, kv(pmixsrv.KeySpawned, true), kv(pmixsrv.KeyParentID, *p.Parent))
	}
	if pr.Node != self {
		return pi
	}
	n := m.Nodes[self]
	pi = append(pi,
		kv(pmixsrv.KeyGlobalRank, pmixsrv.Rank(pr.Rank)),
		kv(pmixsrv.KeyReincarnation, uint32(0)),
		kv(pmixsrv.KeyHostname, n.Name),
		kv(pmixsrv.KeyWDir, p.Job.Apps[pr.App].Wdir),
		kv(pmixsrv.KeyProcDir, sess.ProcDir(p.Nspace, pr.Rank)),
		kv(pmixsrv.KeyNodeSize, uint32(len(n.Procs))),
		kv(pmixsrv.KeyLocalSize, uint32(len(n.Procs))),
		kv(pmixsrv.KeyLocalLdr, pmixsrv.Rank(n.Procs[0])),
		kv(pmixsrv.KeyLocalPeers, joinInts(n.Procs)),
	)
	if len(pr.CPUs) > 0 {
		pi = append(pi, kv(pmixsrv.KeyCPUSet, pmixsrv.CPUSetString(pr.CPUs)))
	}
	// Open MPI 4.1 compares the locality strings of local peers and
	// crashes on a missing or empty one: every process on a node with a
	// known topology gets one, the node's whole CPU set when unbound.
	if n.Topo != nil {
		pi = append(pi, kv(pmixsrv.KeyLocalityString, n.Topo.Locality(pr.CPUs)))
	}
	return pi
}

// ANLMap is the job's process map in the PMI-1/PMI-2 "vector" notation:
// (vector,(first node,nodes,ranks per node),...), runs of nodes that hold
// consecutive blocks of equal size. A map that is not block-shaped has no
// such form and yields "".
func ANLMap(p *Plan) string {
	m := p.Map
	var b strings.Builder
	b.WriteString("(vector")
	next := 0
	for i := 0; i < len(m.Nodes); {
		n := m.Nodes[i]
		for k, r := range n.Procs {
			if r != next+k {
				return ""
			}
		}
		size := len(n.Procs)
		j := i + 1
		next += size
		for j < len(m.Nodes) && len(m.Nodes[j].Procs) == size && m.Nodes[j].Procs[0] == next {
			ok := true
			for k, r := range m.Nodes[j].Procs {
				if r != next+k {
					ok = false
				}
			}
			if !ok {
				break
			}
			next += size
			j++
		}
		b.WriteString(",(" + strconv.Itoa(i) + "," + strconv.Itoa(j-i) + "," + strconv.Itoa(size) + ")")
		i = j
	}
	b.WriteString(")")
	return b.String()
}

func kv(key string, v any) pmixsrv.Info { return pmixsrv.Info{Key: key, Value: v} }

func joinInts(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
