package nodeside

// A daemon's Upstream (daemon.Upstream) is the control plane: its ranks'
// output, events, collectives and requests go up to the launcher through
// the node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"prun/internal/jsonbytes"
	"prun/remote/wire"
	"slices"
	"syscall"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
)

// Write sends a run within the output window (wire/window.go): it waits, and
// with it the rank's iof reader and, once its pipe is full, the rank, while
// the launcher has a window's worth of this node's output to print.
func (n *node) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	if !n.out.Acquire(wire.OutKey{Src: src, St: st}, len(p), partial) {
		return // the link is gone: so is whoever would print this
	}
	if n.up.Send(wire.TOutput, wire.OutputFrame(uint32(n.me), src, st, p, partial)) != nil {
		n.out.Kill() // the link died with it (ctl: whole frames or none)
	}
}
func (n *node) SetSourceInfo(src iof.Source, host string, pid int) {
	n.sendUp(wire.TSourceInfo, &wire.RankSource{Src: src, Host: host, Pid: pid})
}
func (n *node) End(src iof.Source, st iof.Stream) {
	n.sendUp(wire.TEnd, &wire.StreamEnd{Src: src, Stream: st})
}
func (n *node) Event(ev daemon.Event) {
	n.holdSlurmKill(ev)
	if ev.Kind == daemon.ProcExited {
		n.coll.ProcEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
	}
	n.sendUp(wire.TEvent, &ev)
}

// exitedPrefix begins the body of a ProcExited event, as encoding/json
// writes it (fields in order, no space; Kind first): a relay reads only
// those of the events it passes up (collended_test.go checks the form).
var exitedPrefix = fmt.Appendf(nil, `{"Kind":%d,`, daemon.ProcExited)

// childEvent sees a rank's end pass up from a child's subtree: the group
// operations waiting here for it fail (wire/coll.go, RankSet).
func (n *node) childEvent(p []byte) {
	_, _, body, err := wire.Header(p)
	if err != nil || !bytes.HasPrefix(body, exitedPrefix) {
		return
	}
	var ev struct {
		Nspace string
		Rank   int
	}
	if json.Unmarshal(body, &ev) == nil && ev.Rank >= 0 {
		n.coll.ProcEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
	}
}

// Fence is this node's contribution to a collective, combined along the
// tree (wire/coll.go).
func (n *node) Fence(_, kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error)) {
	n.fence(kind, procs, data, done, 0)
}

// fence resolves the participants' nodes from the plans. A namespace this
// daemon does not know may be a spawned job whose plan is still on its way
// (a parent's rank may hear of the spawn from another rank, over MPI, first):
// it waits for the plan a while; then the launcher answers (a connect to
// another launch's job is refused, and said why).
func (n *node) fence(kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error), tries int) {
	names, ok := n.d.NodesOf(procs)
	if !ok {
		if tries < 20 {
			time.AfterFunc(time.Duration(tries+1)*10*time.Millisecond, func() { n.fence(kind, procs, data, done, tries+1) })
			return
		}
		askUp(n, wire.TFence, &wire.FenceReq{Kind: kind, Procs: procs, Data: data}, done)
		return
	}
	verts := make([]int, 0, len(names))
	for _, name := range names {
		verts = append(verts, n.vertex(name))
	}
	slices.Sort(verts)
	verts = slices.Compact(verts)
	n.coll.Contribute(n.me, wire.CollKey(kind, procs), kind, procs, verts, data, done)
}

// vertex is the vertex of the node named name: the launcher's (0) when no
// daemon of the tree runs there.
func (n *node) vertex(name string) int {
	n.vertOnce.Do(func() {
		n.verts = make(map[string]int, len(n.boot.Hosts))
		for i, h := range n.boot.Hosts {
			n.verts[h] = i + 1
		}
	})
	return n.verts[name]
}

// childColl is a child's combined contribution to a collective.
func (n *node) childColl(p []byte) {
	_, src, body, err := wire.Header(p)
	v := int(src)
	if err != nil || v < 1 || v > len(n.boot.Hosts) || ctl.Parent(v, n.boot.Fanout) != n.me {
		return
	}
	var m wire.CollUp
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return
	}
	if m.Expired {
		// A timeout below: the launcher decides.
		n.up.Send(wire.TColl, p)
		return
	}
	if n.coll.Stale(m.Coll, m.Gen) {
		return
	}
	done := func(res []byte, err error) {
		n.kids.Send(v, wire.TCollDone, wire.Frame(uint32(v), uint32(n.me), wire.EncodeColl(&wire.CollResult{Coll: m.Coll, Status: wire.StatusOf(err)}, res)))
	}
	verts, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts))
	if err != nil {
		done(nil, err)
		return
	}
	n.coll.Contribute(v, m.Coll, m.Kind, m.Procs, verts, data, done)
}
func (n *node) DirectModex(_ string, target pmixsrv.Proc, done func([]byte, error)) {
	askUp(n, wire.TDmodex, &wire.DmodexReq{Proc: target}, done)
}
func (n *node) NotifyEvent(_ string, code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) {
	n.sendUp(wire.TNotify, &wire.Notify{Status: code, Source: source, Range: rng, Info: info})
}
func (n *node) JobControl(req pmixsrv.Proc, targets []pmixsrv.Proc, sig syscall.Signal, done func(error)) {
	askUp(n, wire.TJobControl, &wire.JobControlReq{Requester: req, Targets: targets, Sig: int(sig)}, func(_ wire.None, err error) { done(err) })
}
func (n *node) Spawn(req daemon.SpawnRequest) {
	askUp(n, wire.TSpawn, &wire.SpawnReq{Parent: req.Parent, Apps: req.Apps, Preput: req.Preput}, req.Done)
}
func (n *node) Names() daemon.NameService { return nodeNames{n} }
func (n *node) Namespaces(done func([]string)) {
	askUp(n, wire.TNamespaces, &wire.Request{}, func(ns []string, _ error) { done(ns) })
}
func (n *node) ProcTable(nspace string, done func([]pmixsrv.ProcInfo, error)) {
	askUp(n, wire.TProcTable, &wire.NspaceReq{Nspace: nspace}, done)
}

type nodeNames struct{ n *node }

func (x nodeNames) Publish(entries []names.Entry, done func(error)) {
	askUp(x.n, wire.TPublish, &wire.PublishReq{Entries: entries}, func(_ wire.None, err error) { done(err) })
}
func (x nodeNames) Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error)) {
	askUp(x.n, wire.TLookup, &wire.LookupReq{Keys: keys, Wait: wait, Timeout: timeout}, func(es wire.Entries, err error) { done(es, err) })
}
func (x nodeNames) Unpublish(pub string, keys []string, done func(error)) {
	askUp(x.n, wire.TUnpublish, &wire.UnpublishReq{Publisher: jsonbytes.String(pub), Keys: keys}, func(_ wire.None, err error) { done(err) })
}
