package daemon

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"time"

	"prun/names"
	"prun/pmixsrv"
)

// host is the daemon's implementation of the PMIx server module. Local
// bookkeeping happens here; anything that spans nodes goes upstream.
type host struct{ d *Daemon }

// client updates what p's current incarnation told its PMIx server.
func (h host) client(p pmixsrv.Proc, set func(*clientState)) {
	if sh := h.d.shell(p.Nspace); sh != nil {
		sh.ranks.client(int(p.Rank), set)
	}
}

func (h host) ClientConnected(p pmixsrv.Proc) error {
	sh := h.d.shell(p.Nspace)
	if sh == nil {
		return nil
	}
	// The client's PMIx_Init returns after this answer, and from then on
	// it may look into its PMIX_PROCDIR.
	if err := sh.makeDirs(); err != nil {
		return err
	}
	sh.ranks.client(int(p.Rank), func(c *clientState) { c.connected = true })
	return nil
}

func (h host) ClientFinalized(p pmixsrv.Proc) error {
	h.client(p, func(c *clientState) { c.finalized = true })
	return nil
}

func (h host) Abort(p pmixsrv.Proc, status int, msg string, targets []pmixsrv.Proc, done func(error)) error {
	// The launcher ends the whole job whatever the targets: an MPI_Abort on
	// a sub-communicator cannot leave the rest of the job in a usable state.
	msg = strings.TrimSpace(msg)
	if msg == "N/A" { // Open MPI's "no message"
		msg = ""
	}
	h.client(p, func(c *clientState) { c.aborted = true })
	h.d.up.Event(Event{Kind: ProcAborted, Nspace: p.Nspace, Rank: int(p.Rank), Node: h.d.cfg.Name,
		Status: status, Msg: msg})
	done(nil)
	return nil
}

func (h host) Fence(procs []pmixsrv.Proc, info []pmixsrv.Info, data []byte, done func([]byte, error)) error {
	h.d.up.Fence(h.d.cfg.Name, "pmix", procs, data, done)
	return nil
}

func (h host) DirectModex(p pmixsrv.Proc, info []pmixsrv.Info, done func([]byte, error)) error {
	h.d.up.DirectModex(h.d.cfg.Name, p, done)
	return nil
}

// publisher names the owner of published data in the name service.
func publisher(p pmixsrv.Proc) string { return p.Nspace + ":" + strconv.FormatUint(uint64(p.Rank), 10) }

func parsePublisher(s string) pmixsrv.Proc {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return pmixsrv.Proc{Nspace: s, Rank: pmixsrv.RankUndef}
	}
	r, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return pmixsrv.Proc{Nspace: s[:i], Rank: pmixsrv.RankUndef}
	}
	return pmixsrv.Proc{Nspace: s[:i], Rank: pmixsrv.Rank(r)}
}

// isDirective tells directives ("pmix." keys, which clients may not publish)
// from the data of a publish request.
func isDirective(key string) bool { return strings.HasPrefix(key, "pmix.") }

func (h host) Publish(p pmixsrv.Proc, info []pmixsrv.Info, done func(error)) error {
	var entries []names.Entry
	v, _ := pmixsrv.Lookup(info, pmixsrv.KeyPersistence)
	firstRead := v == pmixsrv.PersistFirstRead
	for _, in := range info {
		if !isDirective(in.Key) {
			entries = append(entries, names.Entry{Key: in.Key, Value: in.Value, Publisher: publisher(p), FirstRead: firstRead})
		}
	}
	if len(entries) == 0 {
		return pmixsrv.ErrBadParam
	}
	h.d.up.Names().Publish(entries, func(err error) {
		if errors.Is(err, names.ErrDuplicate) {
			err = pmixsrv.ErrDuplicateKey
		} else if err != nil {
			err = pmixsrv.ErrBadParam
		}
		done(err)
	})
	return nil
}

func (h host) Lookup(p pmixsrv.Proc, keys []string, info []pmixsrv.Info, done func([]pmixsrv.PData, error)) error {
	_, wait := pmixsrv.Lookup(info, pmixsrv.KeyWait)
	var timeout time.Duration
	if v, ok := pmixsrv.Lookup(info, pmixsrv.KeyTimeout); ok {
		if n, ok := v.(int); ok && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	h.d.up.Names().Lookup(keys, wait, timeout, func(found []names.Entry, err error) {
		switch {
		case errors.Is(err, names.ErrTimeout):
			err = pmixsrv.ErrTimeout
		case err != nil:
			err = pmixsrv.ErrNotFound
		}
		out := make([]pmixsrv.PData, len(found))
		for i, e := range found {
			out[i] = pmixsrv.PData{Publisher: parsePublisher(e.Publisher), Key: e.Key, Value: e.Value}
		}
		done(out, err)
	})
	return nil
}

func (h host) Unpublish(p pmixsrv.Proc, keys []string, info []pmixsrv.Info, done func(error)) error {
	h.d.up.Names().Unpublish(publisher(p), keys, func(err error) {
		if err != nil {
			err = pmixsrv.ErrNotFound
		}
		done(err)
	})
	return nil
}

func (h host) RegisterEvents(codes []pmixsrv.Status, info []pmixsrv.Info) error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	for _, c := range codes {
		h.d.events[c]++
	}
	return nil
}

func (h host) DeregisterEvents(codes []pmixsrv.Status) error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	for _, c := range codes {
		if h.d.events[c]--; h.d.events[c] <= 0 {
			delete(h.d.events, c)
		}
	}
	return nil
}

func (h host) NotifyEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) error {
	// The library already delivered it to this node's clients; other
	// nodes get it unless its range ends here, or at the host (a client's
	// PMIX_READY_FOR_DEBUG is for the resource manager alone: another
	// node's library would count it as one of its own clients').
	switch rng {
	case pmixsrv.RangeRM, pmixsrv.RangeLocal, pmixsrv.RangeProcLocal:
		return nil
	}
	if _, relayed := pmixsrv.Lookup(info, keyRelayed); relayed {
		return nil // routed already: the host handed it to the library (DeliverEvent)
	}
	h.d.up.NotifyEvent(h.d.cfg.Name, code, source, rng, info)
	return nil
}

func (h host) Query(p pmixsrv.Proc, queries []pmixsrv.Query, done func([]pmixsrv.Info, error)) error {
	// The answers may be a network away: gather them off the library's thread.
	go func() {
		var out []pmixsrv.Info
		for _, q := range queries {
			nspace := p.Nspace
			if v, ok := pmixsrv.Lookup(q.Qualifiers, pmixsrv.KeyNspace); ok {
				if s, ok := v.(string); ok && s != "" {
					nspace = s
				}
			}
			for _, k := range q.Keys {
				switch k {
				case pmixsrv.KeyQueryNamespaces:
					ch := make(chan []string, 1)
					h.d.up.Namespaces(func(ns []string) { ch <- ns })
					out = append(out, pmixsrv.Info{Key: k, Value: strings.Join(<-ch, ",")})
				case pmixsrv.KeyQueryProcTable, pmixsrv.KeyQueryLocalProcTable:
					table, err := h.procTable(nspace)
					if err != nil {
						continue
					}
					if k == pmixsrv.KeyQueryLocalProcTable {
						local := table[:0:0]
						for _, pi := range table {
							if pi.Host == h.d.cfg.Name {
								local = append(local, pi)
							}
						}
						table = local
					}
					out = append(out, pmixsrv.Info{Key: k, Value: table})
				case pmixsrv.KeyQueryJobStatus:
					if table, err := h.procTable(nspace); err == nil {
						out = append(out, pmixsrv.Info{Key: k, Value: jobState(table)})
					}
				case pmixsrv.KeyQueryNumPsets:
					// The names come first, unasked: Open MPI 5.0's
					// sessions cannot unload a PMIX_SIZE answer (a NULL
					// destination: BAD-PARAM) and stop at the first answer
					// they fail on, and take the count from the names
					// instead (ompi/instance/instance.c, fixed after 5.0).
					names := h.d.psetNames(nspace)
					out = append(out, pmixsrv.Info{Key: pmixsrv.KeyQueryPsetNames, Value: strings.Join(names, ",")},
						pmixsrv.Info{Key: k, Value: pmixsrv.Size(len(names))})
				case pmixsrv.KeyQueryPsetNames:
					out = append(out, pmixsrv.Info{Key: k, Value: strings.Join(h.d.psetNames(nspace), ",")})
				case pmixsrv.KeyQueryPsetMembership:
					v, _ := pmixsrv.Lookup(q.Qualifiers, pmixsrv.KeyPsetName)
					if name, ok := v.(string); ok {
						if members, ok := h.d.psetMembers(name); ok {
							out = append(out, pmixsrv.Info{Key: k, Value: members})
						}
					}
				case pmixsrv.KeyQueryMemoryUsage:
					mem := ""
					if _, ok := pmixsrv.Lookup(q.Qualifiers, pmixsrv.KeyNspace); ok {
						mem = nspace
					}
					out = append(out, pmixsrv.Info{Key: k, Value: h.d.memoryUsage(mem)})
				}
			}
		}
		if len(out) == 0 {
			done(nil, pmixsrv.ErrNotFound)
			return
		}
		done(out, nil)
	}()
	return nil
}

func (h host) JobControl(req pmixsrv.Proc, targets []pmixsrv.Proc, dirs []pmixsrv.Info, done func(error)) error {
	sig := syscall.Signal(-1)
	var method ckptMethod
	checkpoint := false
	for _, in := range dirs {
		switch in.Key {
		case pmixsrv.KeyJobCtrlPreemptible:
			b, _ := in.Value.(bool)
			method.preemptible = b
			method.set = true
		case pmixsrv.KeyJobCtrlCkptSignal:
			if n, ok := in.Value.(int); ok && n > 0 {
				method.sig = syscall.Signal(n)
				method.set = true
			}
		case pmixsrv.KeyJobCtrlCkptEvent:
			if b, ok := in.Value.(bool); ok && b {
				method.event = true
				method.set = true
			}
		case pmixsrv.KeyJobCtrlCheckpoint:
			checkpoint = true
		case pmixsrv.KeyJobCtrlKill, pmixsrv.KeyJobCtrlTerminate:
			if b, ok := in.Value.(bool); ok && b {
				sig = syscall.SIGKILL
			}
		case pmixsrv.KeyJobCtrlSignal:
			if n, ok := in.Value.(int); ok && n > 0 {
				sig = syscall.Signal(n)
			}
		}
	}
	if sig < 0 && !checkpoint && method.set {
		// A process declares how it wants to be checkpointed (Open MPI's
		// mpirun accepts this too): recorded on every node where a target
		// runs (a wildcard: the whole namespace, on every node), through
		// the launcher like any job control, and used when a checkpoint is
		// asked for (SigCheckpoint), which follows the same links after it.
		if len(targets) == 0 {
			targets = []pmixsrv.Proc{req}
		}
		h.d.up.JobControl(req, targets, method.signal(), done)
		return nil
	}
	if sig < 0 && checkpoint {
		sig = SigCheckpoint
	} else if sig < 0 {
		return pmixsrv.ErrNotSupported
	}
	if len(targets) == 0 {
		targets = []pmixsrv.Proc{{Nspace: req.Nspace, Rank: pmixsrv.RankWildcard}}
	}
	h.d.up.JobControl(req, targets, sig, done)
	return nil
}

func (h host) Log(p pmixsrv.Proc, data, directives []pmixsrv.Info) error {
	logged := false
	for _, in := range data {
		switch in.Key {
		case pmixsrv.KeyLogStderr, pmixsrv.KeyLogStdout, pmixsrv.KeyLogMsg:
			switch v := in.Value.(type) {
			case string:
				h.d.up.Event(Event{Kind: LogMessage, Nspace: p.Nspace, Rank: int(p.Rank), Node: h.d.cfg.Name,
					Msg: strings.TrimRight(v, "\n")})
				logged = true
			case []byte: // Open MPI's help messages (showhelp.go)
				m, text, err := decodeHelp(v)
				if err != nil {
					continue
				}
				if text {
					h.d.up.Event(Event{Kind: HelpMessage, Nspace: p.Nspace, Rank: int(p.Rank), Node: h.d.cfg.Name,
						Msg: m.Text, Topic: m.File + " / " + m.Topic})
				}
				logged = true
			}
		}
	}
	if !logged {
		return pmixsrv.ErrNotSupported
	}
	return nil
}

func (h host) Spawn(p pmixsrv.Proc, jobInfo []pmixsrv.Info, apps []pmixsrv.App, done func(string, error)) error {
	req := SpawnRequest{Parent: p, Done: done}
	for _, a := range apps {
		sa := SpawnApp{Cmd: a.Cmd, Argv: a.Argv, Env: a.Env, Cwd: a.Cwd, NP: a.MaxProcs}
		if len(sa.Argv) == 0 {
			sa.Argv = []string{a.Cmd}
		}
		if v, ok := pmixsrv.Lookup(a.Info, pmixsrv.KeyWDir); ok && sa.Cwd == "" {
			sa.Cwd, _ = v.(string)
		}
		// Open MPI passes MPI_Info's "host" and "hostfile" (and
		// "add-host"/"add-hostfile", which can name only hosts prun already
		// has here) as these, per app or for the whole spawn.
		str := func(keys ...string) string {
			for _, info := range [][]pmixsrv.Info{a.Info, jobInfo} {
				for _, k := range keys {
					if v, ok := pmixsrv.Lookup(info, k); ok {
						if s, ok := v.(string); ok && s != "" {
							return s
						}
					}
				}
			}
			return ""
		}
		sa.Hosts = str(pmixsrv.KeyHost, pmixsrv.KeyAddHost)
		sa.Hostfile = str(pmixsrv.KeyHostfile, pmixsrv.KeyAddHostfile)
		req.Apps = append(req.Apps, sa)
	}
	if len(req.Apps) == 0 {
		return pmixsrv.ErrBadParam
	}
	h.d.up.Spawn(req)
	return nil
}

// Connect and Disconnect are barriers across the nodes hosting procs: on
// one node both namespaces' data is already in the local server.
func (h host) Connect(procs []pmixsrv.Proc, info []pmixsrv.Info, done func(error)) error {
	h.d.up.Fence(h.d.cfg.Name, "connect", procs, nil, func(_ []byte, err error) { done(err) })
	return nil
}

func (h host) Disconnect(procs []pmixsrv.Proc, info []pmixsrv.Info, done func(error)) error {
	h.d.up.Fence(h.d.cfg.Name, "disconnect", procs, nil, func(_ []byte, err error) { done(err) })
	return nil
}
