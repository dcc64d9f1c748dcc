package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"prun/mapper"
	"prun/names"
	"prun/pmi"
	"prun/pmixsrv"
)

// pmiJob is one job's PMI-1/PMI-2 service on one node: the part of the
// shell that MPICH ranks talk to over PMI_FD. Barriers are the same upstream
// collective as PMIx fences (kind "pmi"), so they will span nodes with it;
// published names share the PMIx name service.
type pmiJob struct {
	sh   *shell
	port *pmiPort // -pmi-port: where the job's ranks connect (pmiport.go); nil: each inherits a socket

	mu       sync.Mutex
	kvs      map[string]string // the job's KVS as of the last barrier
	pending  map[string]string // this node's puts since the last barrier
	keys     []string          // sorted kvs keys, for getbyidx
	waiting  []func(error)     // local ranks inside the current barrier
	nodeKVS  map[string]string // info-putnodeattr
	nodeWait map[string][]func(string, bool)
}

func newPMIJob(sh *shell) *pmiJob {
	j := &pmiJob{sh: sh, kvs: map[string]string{}, pending: map[string]string{},
		nodeKVS: map[string]string{}, nodeWait: map[string][]func(string, bool){}}
	for _, kv := range sh.plan.Preput {
		j.kvs[kv[0]] = kv[1]
		j.keys = append(j.keys, kv[0])
	}
	sort.Strings(j.keys)
	return j
}

// Kvsname is the job's PMI KVS name and PMI-2 job id.
func (j *pmiJob) kvsname() string { return "kvs_" + j.sh.plan.Nspace }

// env is what a PMI-1/PMI-2 client (MPICH) needs, as Hydra gives it: an
// inherited socket, or with -pmi-port where to connect and who it is.
func (j *pmiJob) env(pr mapper.Proc) []string {
	p := j.sh.plan
	node := p.Map.Nodes[pr.Node]
	conn := []string{"PMI_FD=3", "PMI_RANK=" + strconv.Itoa(pr.Rank), "PMI_SIZE=" + strconv.Itoa(len(p.Map.Procs))}
	if j.port != nil {
		conn = []string{"PMI_PORT=" + j.port.addr(), "PMI_ID=" + strconv.Itoa(pr.Rank)}
	}
	if p.ParentKVS != "" {
		// MPICH's PMI-1 client learns that it was spawned (and must
		// connect to its parents) from this alone, as Hydra tells it.
		conn = append(conn, "PMI_SPAWNED=1")
	}
	conn = append(conn,
		"PMI_JOBID="+j.kvsname(),
		"MPI_LOCALNRANKS="+strconv.Itoa(len(node.Procs)),
		"MPI_LOCALRANKID="+strconv.Itoa(pr.LocalRank),
	)
	if !p.Job.NoHostnamePropagation {
		conn = append(conn, "MPIR_CVAR_CH3_INTERFACE_HOSTNAME="+node.Name)
	}
	return conn
}

// socket makes the connection a rank inherits as PMI_FD (descriptor 3),
// unless the job's ranks connect to its -pmi-port: then both are nil.
func (j *pmiJob) socket(fs *startFiles) (server, client *os.File, err error) {
	if j.port != nil {
		return nil, nil, nil
	}
	if server, client, err = socketPair(); err == nil {
		fs.add(server, client)
	}
	return server, client, err
}

// serve serves rank's PMI connection; the channel closes when it ends.
func (j *pmiJob) serve(conn *os.File, rank int, versions pmi.Versions) <-chan struct{} {
	served := make(chan struct{})
	go func() {
		defer close(served)
		pmi.Serve(conn, rank, j, versions)
	}()
	return served
}

// socketPair makes a connected pair of close-on-exec unix stream sockets.
func socketPair() (server, client *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("PMI socket: %w", err)
	}
	// The server's end is served through Go's poller: a rank that never
	// speaks PMI (most do not) holds no OS thread in a read.
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("PMI socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "pmi-server"), os.NewFile(uintptr(fds[1]), "pmi-client"), nil
}

func (j *pmiJob) Info(rank int) pmi.RankInfo {
	p := j.sh.plan
	return pmi.RankInfo{Rank: rank, Size: len(p.Map.Procs), Appnum: p.Map.Procs[rank].App,
		UniverseSize: p.UnivSize, Kvsname: j.kvsname(), Spawner: p.ParentKVS}
}

func (j *pmiJob) Put(rank int, key, value string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending[key] = value
	return nil
}

// Fence completes when every local rank has entered and the upstream
// allgather of all nodes' puts has returned.
func (j *pmiJob) Fence(rank int, done func(error)) {
	j.mu.Lock()
	j.waiting = append(j.waiting, done)
	if len(j.waiting) < len(j.sh.plan.procsOn(j.sh.self)) {
		j.mu.Unlock()
		return
	}
	blob := encodeKV(j.pending)
	j.pending = map[string]string{}
	dones := j.waiting
	j.waiting = nil
	j.mu.Unlock()
	procs := []pmixsrv.Proc{{Nspace: j.sh.plan.Nspace, Rank: pmixsrv.RankWildcard}}
	j.sh.d.up.Fence(j.sh.nodeName(), "pmi", procs, blob, func(all []byte, err error) {
		if err == nil {
			err = j.merge(all)
		}
		for _, d := range dones {
			d(err)
		}
	})
}

func (j *pmiJob) merge(all []byte) error {
	kv, err := decodeKV(all)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for k, v := range kv {
		j.kvs[k] = v
	}
	j.keys = j.keys[:0]
	for k := range j.kvs {
		j.keys = append(j.keys, k)
	}
	sort.Strings(j.keys)
	return nil
}

func (j *pmiJob) Get(rank int, key string) (string, bool) {
	if v, ok := j.JobAttr(key); ok {
		return v, true
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if v, ok := j.kvs[key]; ok {
		return v, true
	}
	v, ok := j.pending[key] // a rank may read what this node put before the barrier
	return v, ok
}

func (j *pmiJob) GetByIndex(i int) (string, string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if i < 0 || i >= len(j.keys) {
		return "", "", false
	}
	return j.keys[i], j.kvs[j.keys[i]], true
}

// JobAttr answers the launcher-provided keys MPICH asks for.
func (j *pmiJob) JobAttr(key string) (string, bool) {
	switch key {
	case "PMI_process_mapping":
		m := ANLMap(j.sh.plan)
		return m, m != ""
	case "universeSize":
		return strconv.Itoa(j.sh.plan.UnivSize), true
	case "PMI_cpusets":
		// This node's bindings, "rank:cpulist;..." (prun's own key: PMI has
		// no standard one).
		var parts []string
		for _, r := range j.sh.plan.procsOn(j.sh.self) {
			if cpus := j.sh.plan.Map.Procs[r].CPUs; len(cpus) > 0 {
				parts = append(parts, strconv.Itoa(r)+":"+cpus.String())
			}
		}
		return strings.Join(parts, ";"), true
	case "PMI_hwloc_xmlfile":
		if x := j.sh.d.topoXML; x != "" {
			if _, err := os.Stat(x); err == nil {
				return x, true
			}
		}
	}
	return "", false
}

func (j *pmiJob) NodeAttrPut(key, value string) {
	j.mu.Lock()
	j.nodeKVS[key] = value
	waiters := j.nodeWait[key]
	delete(j.nodeWait, key)
	j.mu.Unlock()
	for _, w := range waiters {
		w(value, true)
	}
}

func (j *pmiJob) NodeAttrGet(key string, wait bool, done func(string, bool)) {
	j.mu.Lock()
	if v, ok := j.nodeKVS[key]; ok || !wait {
		j.mu.Unlock()
		done(v, ok)
		return
	}
	j.nodeWait[key] = append(j.nodeWait[key], done)
	j.mu.Unlock()
}

func (j *pmiJob) publisher(rank int) string {
	return publisher(pmixsrv.Proc{Nspace: j.sh.plan.Nspace, Rank: pmixsrv.Rank(rank)})
}

func (j *pmiJob) Publish(rank int, service, port string) error {
	ch := make(chan error, 1) // the PMI server's goroutine may wait
	j.sh.d.up.Names().Publish([]names.Entry{{Key: service, Value: port, Publisher: j.publisher(rank)}}, func(err error) { ch <- err })
	return <-ch
}

func (j *pmiJob) Unpublish(rank int, service string) error {
	ch := make(chan error, 1)
	j.sh.d.up.Names().Unpublish(j.publisher(rank), []string{service}, func(err error) { ch <- err })
	return <-ch
}

func (j *pmiJob) Lookup(service string, done func(string, bool)) {
	j.sh.d.up.Names().Lookup([]string{service}, false, 0, func(found []names.Entry, err error) {
		if err != nil || len(found) == 0 {
			done("", false)
			return
		}
		s, ok := found[0].Value.(string) // a PMIx client may have published another type
		done(s, ok)
	})
}

func (j *pmiJob) Spawn(rank int, req pmi.SpawnRequest, done func(string, error)) {
	sr := SpawnRequest{Parent: pmixsrv.Proc{Nspace: j.sh.plan.Nspace, Rank: pmixsrv.Rank(rank)}, FailJobOnRefusal: req.Unheard}
	for _, a := range req.Apps {
		sa := SpawnApp{Cmd: a.Cmd, Argv: append([]string{a.Cmd}, a.Argv...), NP: a.MaxProcs}
		for _, f := range a.Info { // the info keys Hydra honours
			switch f.Key {
			case "wdir":
				sa.Cwd = f.Value
			case "host", "hosts":
				sa.Hosts = f.Value
			case "hostfile":
				sa.Hostfile = f.Value
			case "path":
				sa.Path = f.Value
			}
		}
		sr.Apps = append(sr.Apps, sa)
	}
	for _, f := range req.Preput {
		sr.Preput = append(sr.Preput, [2]string{f.Key, f.Value})
	}
	sr.Done = func(nspace string, err error) {
		if err != nil {
			done("", err)
			return
		}
		done("kvs_"+nspace, nil)
	}
	j.sh.d.up.Spawn(sr)
}

func (j *pmiJob) Abort(rank, code int, msg string) {
	j.sh.ranks.client(rank, func(c *clientState) { c.aborted = true })
	j.sh.d.up.Event(Event{Kind: ProcAborted, Nspace: j.sh.plan.Nspace, Rank: rank, Node: j.sh.nodeName(),
		Status: code, Msg: msg})
}

func (j *pmiJob) Connected(rank int) {
	j.sh.ranks.client(rank, func(c *clientState) { c.connected = true })
}

func (j *pmiJob) Finalize(rank int) {
	j.sh.ranks.client(rank, func(c *clientState) { c.finalized = true })
}

func (j *pmiJob) ProtocolError(rank int, err error) {
	j.sh.d.up.Event(Event{Kind: ProtocolError, Nspace: j.sh.plan.Nspace, Rank: rank, Node: j.sh.nodeName(),
		Msg: err.Error()})
}

// encodeKV and decodeKV carry a node's puts through the allgather:
// key NUL value NUL ...; keys and values cannot hold NUL (they came from
// PMI text).
func encodeKV(kv map[string]string) []byte {
	var b bytes.Buffer
	for k, v := range kv {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(v)
		b.WriteByte(0)
	}
	return b.Bytes()
}

func decodeKV(data []byte) (map[string]string, error) {
	out := map[string]string{}
	parts := bytes.Split(data, []byte{0})
	if len(parts)%2 != 1 || len(parts[len(parts)-1]) != 0 {
		return nil, errors.New("PMI barrier: malformed key-value data")
	}
	for i := 0; i+1 < len(parts); i += 2 {
		out[string(parts[i])] = string(parts[i+1])
	}
	return out, nil
}
