package remote

import (
	"errors"
	"fmt"
	"prun/remote/spawn"
	"prun/remote/wire"
	"slices"
	"strings"
	"syscall"

	"prun/daemon"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
)

// dispatch handles a frame from below.
func (t *Tree) dispatch(typ uint8, payload []byte) {
	_, src, body, err := wire.Header(payload)
	v := int(src)
	if err != nil || v < 1 || v > len(t.cfg.Hosts) {
		return
	}
	host := t.cfg.Hosts[v-1]
	switch typ {
	case wire.TOutput:
		// Queued, never written here: this goroutine reads the link.
		if s, st, p, partial, err := wire.DecodeOutput(body); err == nil {
			t.out.push(wire.OutKey{Src: s, St: st}, outRun{v: v, p: p, partial: partial})
		}
		return
	case wire.TStdinAck:
		ns, ack, err := wire.SplitStream(body)
		k := 0
		if err == nil {
			k, err = wire.DecodeAck(ack, wire.StdinWindow)
		}
		if err != nil {
			t.nodeFailed(host, err)
		} else if w := t.window(v, ns, false); w != nil {
			w.Release(k)
		}
		return
	case wire.TPreloadAck:
		if k, err := wire.DecodeAck(body, wire.PreloadChunk); err == nil {
			t.preload[v-1].Release(k)
		} else {
			t.nodeFailed(host, err)
		}
		return
	case wire.TGathered:
		if err := t.gather.Answered(v, body); err != nil {
			t.nodeFailed(host, err)
		}
		return
	case wire.TStdinDone:
		// The stdin fan-out drops the node's stream.
		if ns, _, err := wire.SplitStream(body); err == nil {
			if w := t.window(v, ns, false); w != nil {
				w.Kill()
			}
		}
		return
	}
	if err := t.handle(v, host, typ, len(payload), body); err != nil {
		t.nodeFailed(host, err)
	}
}

// handle handles a message from vertex v (of host); an error is one it
// cannot read.
func (t *Tree) handle(v int, host string, typ uint8, size int, body []byte) error {
	switch typ {
	case wire.THello:
		var m wire.Hello
		if err := wire.Decode(body, &m); err != nil {
			return err
		}
		return t.hello(v, v, &m)
	case wire.THellos:
		return t.subtreeHellos(v, body)
	case wire.TFailed, wire.TGaveUp:
		return wire.On(body, func(m *wire.NodeErr) { t.failed(v, host, typ == wire.TGaveUp, m) })
	case wire.TSourceInfo:
		return wire.On(body, func(m *wire.RankSource) {
			// Queued too: the Writer's lock may be held by a write to a stalled
			// stdout. Before the source's runs on both streams (applying it
			// twice changes nothing).
			info := &sourceInfo{m.Host, m.Pid}
			for _, st := range []iof.Stream{iof.Stdout, iof.Stderr} {
				t.out.push(wire.OutKey{Src: m.Src, St: st}, outRun{v: v, info: info})
			}
		})
	case wire.TEnd:
		return wire.On(body, func(m *wire.StreamEnd) {
			t.out.push(wire.OutKey{Src: m.Src, St: m.Stream}, outRun{v: v, end: true}) // after the stream's runs
		})
	case wire.TEvent:
		return wire.On(body, func(ev *daemon.Event) { t.out.pushEvent(v, *ev) })
	case wire.TFence:
		// A collective whose participants the daemon could not resolve (a
		// namespace it has no plan of): the launcher says why it fails.
		return wire.On(body, func(m *wire.FenceReq) {
			var err error = pmixsrv.ErrBadParam
			if u, ok := t.up.(unresolved); ok {
				err = u.Unresolved(m.Kind, m.Procs)
			}
			answer(t, v, m.ID, []byte(nil), err)
		})
	case wire.TColl:
		return t.collUp(v, size, body)
	case wire.TDmodex, wire.TNotify, wire.TJobControl, wire.TSpawn, wire.TPublish, wire.TLookup, wire.TUnpublish, wire.TNamespaces, wire.TProcTable:
		return t.request(v, host, typ, body)
	case wire.TClosed:
		return wire.On(body, t.closeAnswer)
	case wire.TReply:
		t.calls.Answered(body)
	}
	return nil
}

// subtreeHellos: a subtree's hellos, combined on the way (remote/nodeside/hello.go): each
// of a vertex of the subtree of the daemon that sent them.
func (t *Tree) subtreeHellos(v int, body []byte) error {
	var m wire.SubtreeHellos
	if err := wire.Decode(body, &m); err != nil {
		return err
	}
	for i := range m.Hellos {
		if w := m.Hellos[i].Vertex; w < 1 || w > len(t.cfg.Hosts) || !wire.InSubtree(w, v, t.cfg.Fanout) {
			return wire.ErrHelloOutside
		}
	}
	for i := range m.Hellos {
		if err := t.hello(v, m.Hellos[i].Vertex, &m.Hellos[i]); err != nil {
			return err
		}
	}
	return nil
}

// failed: a node failed (to start, or its link), or a daemon gave up on
// its parent (gaveUp).
func (t *Tree) failed(v int, host string, gaveUp bool, m *wire.NodeErr) {
	switch {
	case gaveUp:
		t.nodeFailed(host, &GaveUp{Why: m.Err})
	case strings.HasPrefix(m.Err, spawn.SlurmEndedStep) && t.kids.SlurmStep():
		// Slurm's word on why (a failed node, scancel, the time limit),
		// asked on the link's reader: the ranks' deaths by the same
		// SIGTERM, which follow on this link, must not be news first.
		t.kids.SlurmFail(v, errors.New(m.Err))
	default:
		t.nodeFailed(m.Host, errors.New(m.Err))
	}
}

// collUp: a child's subtree's combined contribution, to the launcher's
// vertex of the combination.
func (t *Tree) collUp(v, size int, body []byte) error {
	var m wire.CollUp
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return err
	}
	key := m.Coll
	if m.Expired {
		t.root.timedOut(key, m.Kind, m.Gen, m.Missing)
		return nil
	}
	if t.root.cs.Stale(key, m.Gen) {
		return nil
	}
	t.stats.collIn(key, size)
	done := func(res []byte, err error) {
		b := wire.Frame(uint32(v), wire.ToLauncher, wire.EncodeColl(&wire.CollResult{Coll: key, Status: wire.StatusOf(err)}, res))
		t.stats.collOut(key, len(b), err != nil)
		t.kids.Send(v, wire.TCollDone, b)
	}
	verts, err := wire.UnpackVerts(m.Verts, len(t.cfg.Hosts))
	if err != nil {
		done(nil, err)
		return nil
	}
	t.root.cs.Contribute(v, key, m.Kind, m.Procs, verts, data, done)
	return nil
}

// request: a daemon asks the launcher's upstream (direct modex, events,
// job control, spawn, names, queries); the answer goes back by id.
func (t *Tree) request(v int, host string, typ uint8, body []byte) error {
	up := t.up
	switch typ {
	case wire.TDmodex:
		return wire.On(body, func(m *wire.DmodexReq) {
			up.DirectModex(host, m.Proc, func(data []byte, err error) { answer(t, v, m.ID, data, err) })
		})
	case wire.TNotify:
		return wire.On(body, func(m *wire.Notify) {
			up.NotifyEvent(host, m.Status, m.Source, m.Range, m.Info)
		})
	case wire.TJobControl:
		return wire.On(body, func(m *wire.JobControlReq) {
			up.JobControl(m.Requester, m.Targets, syscall.Signal(m.Sig), func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TSpawn:
		return wire.On(body, func(m *wire.SpawnReq) {
			up.Spawn(daemon.SpawnRequest{Parent: m.Parent, Apps: m.Apps, Preput: m.Preput, Done: func(ns string, err error) {
				answer(t, v, m.ID, ns, err)
			}})
		})
	case wire.TPublish:
		return wire.On(body, func(m *wire.PublishReq) {
			up.Names().Publish(m.Entries, func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TLookup:
		return wire.On(body, func(m *wire.LookupReq) {
			up.Names().Lookup(m.Keys, m.Wait, m.Timeout, func(e []names.Entry, err error) { answer(t, v, m.ID, wire.Entries(e), err) })
		})
	case wire.TUnpublish:
		return wire.On(body, func(m *wire.UnpublishReq) {
			up.Names().Unpublish(string(m.Publisher), m.Keys, func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TNamespaces:
		return wire.On(body, func(m *wire.Request) {
			up.Namespaces(func(ns []string) { answer(t, v, m.ID, ns, nil) })
		})
	case wire.TProcTable:
		return wire.On(body, func(m *wire.NspaceReq) {
			up.ProcTable(m.Nspace, func(pt []pmixsrv.ProcInfo, err error) { answer(t, v, m.ID, pt, err) })
		})
	}
	return nil
}

// closeAnswer: a subtree's answer to the closing broadcast.
func (t *Tree) closeAnswer(m *wire.Closed) {
	t.mu.Lock()
	answered := t.closeAnswers
	t.mu.Unlock()
	if answered != nil && m.Count > 0 {
		select {
		case answered <- m.Count:
		default: // more answers than daemons: a confused subtree, not worth a wait
		}
	}
}

// hello records vertex v's hello, which came over the link of vertex src;
// the start is over when every daemon's is in.
func (t *Tree) hello(src, v int, m *wire.Hello) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hellos[v] != nil {
		return nil
	}
	if w := m.TopoOf; w != 0 {
		// Sent before over the same link: recorded already.
		ref := t.hellos[w]
		if w < 1 || w > len(t.cfg.Hosts) || !wire.InSubtree(w, src, t.cfg.Fanout) || ref == nil {
			return wire.ErrHelloTopo
		}
		m.Topo, m.TopoXML, m.TopoOf = ref.Topo, ref.TopoXML, 0
	}
	t.hellos[v] = m
	if r := t.revival[v]; r != nil {
		delete(t.revival, v)
		delete(t.down, v)
		r.back(v)
		return nil
	}
	if t.started {
		return nil // a node lost during the start said hello after all: still lost
	}
	if t.cfg.OnHello != nil {
		t.cfg.OnHello(len(t.hellos), len(t.cfg.Hosts))
	}
	if len(t.hellos) == len(t.cfg.Hosts) {
		t.started = true
		t.stats.setPhase(phaseRun)
		close(t.ready)
	}
	return nil
}

// unresolved is the launcher's answer to a collective whose participants
// a daemon could not resolve (upstream).
type unresolved interface {
	Unresolved(kind string, procs []pmixsrv.Proc) error
}

// failCollectives fails, everywhere, the collectives that the daemons of
// vertices lost take part in: the launcher decides, each daemon fails its
// pending ones (and later ones with those nodes), and so does the root.
func (t *Tree) failCollectives(lost []int, cause error) {
	if len(lost) == 0 {
		return
	}
	slices.Sort(lost)
	err := fmt.Errorf("a collective failed: %v: %w", cause, pmixsrv.ErrUnreach)
	body, _ := wire.Encode(&wire.CollFail{Verts: wire.PackVerts(lost), Status: wire.StatusOf(err)}) // numbers and words: it encodes
	t.kids.Broadcast(wire.TCollFail, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
	t.root.cs.Fail(lost, err)
}
