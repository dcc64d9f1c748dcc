package daemon

import (
	"strings"
	"testing"

	"prun/hostfile"
	"prun/jobspec"
	"prun/mapper"
	"prun/pmixsrv"
	"prun/sessiondir"
)

func plan(t *testing.T, hosts []hostfile.Host, nps ...int) *Plan {
	j := &jobspec.Job{CmdLine: "prun test"}
	for _, n := range nps {
		j.Apps = append(j.Apps, jobspec.App{NP: n, Argv: []string{"./a", "x"}, Wdir: "/w"})
	}
	m, err := mapper.Place(j, hostfile.Allocation{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return &Plan{Nspace: "ns", JobID: "1", Job: j, Map: m, UnivSize: m.Slots}
}

func TestANLMap(t *testing.T) {
	for _, tc := range []struct {
		hosts []hostfile.Host
		nps   []int
		want  string
	}{
		{[]hostfile.Host{{Name: "a", Slots: 4}}, []int{3}, "(vector,(0,1,3))"},
		{[]hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}, []int{4}, "(vector,(0,2,2))"},
		{[]hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}, {Name: "c", Slots: 1}}, []int{2, 3}, "(vector,(0,2,2),(2,1,1))"},
	} {
		if got := ANLMap(plan(t, tc.hosts, tc.nps...)); got != tc.want {
			t.Errorf("%v %v: %s, want %s", tc.hosts, tc.nps, got, tc.want)
		}
	}
}

// find returns the value of key in infos, descending into nothing.
func find(infos []pmixsrv.Info, key string) any {
	v, _ := pmixsrv.Lookup(infos, key)
	return v
}

func TestNspaceInfoRealms(t *testing.T) {
	p := plan(t, []hostfile.Host{{Name: "n0", Slots: 8}}, 2, 3)
	info := nspaceInfo(p, &sessiondir.Dir{Top: "/tmp/s"}, 0)
	if find(info, pmixsrv.KeyJobSize) != uint32(5) || find(info, pmixsrv.KeyJobNumApps) != uint32(2) ||
		find(info, pmixsrv.KeyLocalPeers) != "0,1,2,3,4" || find(info, pmixsrv.KeyNSDir) != "/tmp/s/ns" ||
		find(info, pmixsrv.KeyANLMap) != "(vector,(0,1,5))" || find(info, pmixsrv.KeyTdirRmclean) != true {
		t.Fatalf("job realm wrong: %+v", info)
	}
	var apps, nodes, procs int
	for _, in := range info {
		sub, _ := in.Value.([]pmixsrv.Info)
		switch in.Key {
		case pmixsrv.KeyAppInfoArray:
			if sub[0].Key != pmixsrv.KeyAppNum {
				t.Errorf("app array must start with its appnum: %+v", sub)
			}
			apps++
		case pmixsrv.KeyNodeInfoArray:
			nodes++
		case pmixsrv.KeyProcInfoArray:
			if sub[0].Key != pmixsrv.KeyRank || sub[0].Value != pmixsrv.Rank(procs) {
				t.Errorf("proc array must start with its rank: %+v", sub)
			}
			if find(sub, pmixsrv.KeyLocalRank) != uint16(procs) || find(sub, pmixsrv.KeyProcDir) != "/tmp/s/ns/"+string(rune('0'+procs)) {
				t.Errorf("proc %d: %+v", procs, sub)
			}
			procs++
		}
	}
	if apps != 2 || nodes != 1 || procs != 5 {
		t.Errorf("apps=%d nodes=%d procs=%d", apps, nodes, procs)
	}
}

func TestRankEnvLayers(t *testing.T) {
	base := []string{"PATH=/bin", "PMIX_RANK=7", "PMIX_MCA_gds=hash", "OMPI_COMM_WORLD_RANK=9", "OMPI_MCA_btl=self", "PRUN_RANK=3", "PRUN_MINE=1", "KEEP=1"}
	env := strings.Join(rankEnv(base, []string{"KEEP=user"}, []string{"PMIX_RANK=0"}, []string{"OMPI_COMM_WORLD_RANK=0", "PRUN_RANK=0"},
		[]string{"OMPI_MCA_btl=tuned", "OMPI_MCA_pml=^cm"}), " ")
	for _, want := range []string{"PATH=/bin", "PMIX_RANK=0", "PMIX_MCA_gds=hash", "OMPI_COMM_WORLD_RANK=0", "OMPI_MCA_btl=self", "KEEP=user", "OMPI_MCA_pml=^cm", "PRUN_RANK=0", "PRUN_MINE=1"} {
		if !strings.Contains(" "+env+" ", " "+want+" ") {
			t.Errorf("env lacks %s: %s", want, env)
		}
	}
	for _, bad := range []string{"PMIX_RANK=7", "OMPI_COMM_WORLD_RANK=9", "PRUN_RANK=3", "OMPI_MCA_btl=tuned"} {
		if strings.Contains(" "+env+" ", " "+bad+" ") {
			t.Errorf("env has %s: %s", bad, env)
		}
	}
}

// A user's interface exclude list (by -x, --mca or the environment) drops
// prun's include default: Open MPI refuses the two together.
func TestRankEnvTuningConflicts(t *testing.T) {
	tuning := []string{"OMPI_MCA_btl_tcp_if_include=10.0.0.0/24", "OMPI_MCA_oob_tcp_if_include=10.0.0.0/24", "OMPI_MCA_pml=^cm"}
	env := " " + strings.Join(rankEnv([]string{"OMPI_MCA_oob_tcp_if_exclude=lo"}, []string{"OMPI_MCA_btl_tcp_if_exclude=eth1"},
		nil, nil, tuning), " ") + " "
	for _, want := range []string{"OMPI_MCA_btl_tcp_if_exclude=eth1", "OMPI_MCA_oob_tcp_if_exclude=lo", "OMPI_MCA_pml=^cm"} {
		if !strings.Contains(env, " "+want+" ") {
			t.Errorf("env lacks %s:%s", want, env)
		}
	}
	if strings.Contains(env, "_if_include=") {
		t.Errorf("a default include list stayed beside the user's exclude:%s", env)
	}
	// Without an exclude, the defaults stay.
	env = " " + strings.Join(rankEnv(nil, nil, nil, nil, tuning), " ") + " "
	if !strings.Contains(env, " OMPI_MCA_btl_tcp_if_include=10.0.0.0/24 ") {
		t.Errorf("default dropped:%s", env)
	}
}

// countInfos counts the pmix_info_t a registration makes of infos: every
// entry, and those of the arrays inside.
func countInfos(infos []pmixsrv.Info) int {
	n := len(infos)
	for _, in := range infos {
		if sub, ok := in.Value.([]pmixsrv.Info); ok {
			n += countInfos(sub)
		}
	}
	return n
}

// Every daemon registers every rank and node of the job, so what one more
// node (one rank on it) adds to a daemon's registration is what each daemon
// holds, and on one host all of them at once: bounded by what a client may
// ask of a remote peer (procInfo). Per remote node and rank it was 22
// pmix_info_t (544 bytes each while registering), 23 with a topology.
func TestNspaceInfoPerRemoteNode(t *testing.T) {
	hosts := func(n int) []hostfile.Host {
		var hs []hostfile.Host
		for i := 0; i < n; i++ {
			hs = append(hs, hostfile.Host{Name: "node" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Slots: 1})
		}
		return hs
	}
	sess := &sessiondir.Dir{Top: "/tmp/s"}
	small := countInfos(nspaceInfo(plan(t, hosts(2), 2), sess, 0))
	big := countInfos(nspaceInfo(plan(t, hosts(66), 66), sess, 0))
	if per := float64(big-small) / 64; per > 15 {
		t.Errorf("%.1f pmix_info_t per remote node and rank, want at most 15", per)
	}
	p := plan(t, hosts(3), 3)
	info := nspaceInfo(p, sess, 1)
	for _, in := range info {
		sub, _ := in.Value.([]pmixsrv.Info)
		if in.Key != pmixsrv.KeyProcInfoArray {
			continue
		}
		r := int(sub[0].Value.(pmixsrv.Rank))
		local := p.Map.Procs[r].Node == 1
		// What every rank must have: the standard's retrieval of app keys
		// by any rank of the app (keys.c asks each rank's, on every node).
		for _, k := range []string{pmixsrv.KeyAppNum, pmixsrv.KeyAppRank, pmixsrv.KeyLocalRank, pmixsrv.KeyNodeRank,
			pmixsrv.KeyNodeID, pmixsrv.KeyAppSize, pmixsrv.KeyAppLdr, pmixsrv.KeyAppArgv} {
			if find(sub, k) == nil {
				t.Errorf("rank %d (local %v) lacks %s: %+v", r, local, k, sub)
			}
		}
		for _, k := range []string{pmixsrv.KeyGlobalRank, pmixsrv.KeyReincarnation, pmixsrv.KeyWDir, pmixsrv.KeyProcDir,
			pmixsrv.KeyLocalPeers, pmixsrv.KeyHostname} {
			if got := find(sub, k) != nil; got != local {
				t.Errorf("rank %d (local %v): has %s = %v", r, local, k, got)
			}
		}
	}
}
