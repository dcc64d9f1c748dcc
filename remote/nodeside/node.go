package nodeside

import (
	"encoding/json"
	"errors"
	"fmt"
	"prun/internal/trace"
	"prun/remote/spawn"
	"prun/remote/wire"
	"sync"
	"sync/atomic"
	"syscall"

	"prun/ctl"
	"prun/daemon"
	"prun/topology"
)

// node is a remote daemon's side of the control plane; it is the
// daemon.Upstream of the node's Daemon.
type node struct {
	boot      wire.Bootstrap
	slurmTerm chan struct{} // closed when Slurm signalled the step (AgentSlurm only)
	me        int
	host      string
	parent    *ctl.Link
	up        *upQueue // what goes to the parent, batched (upqueue.go)
	kids      *spawn.Spawner
	d         *daemon.Daemon
	topo      *topology.Topology
	calls     wire.Calls
	coll      *wire.Collectives // the collectives pending at this vertex (wire/coll.go)
	gather    *wire.Gatherer    // the gathers pending at this vertex (gather.go)
	stdin     stdinStreams      // each job's stdin, by namespace
	out       *wire.OutCredit   // the output window (wire/window.go)

	helloSent chan struct{} // closed once this daemon's hello is sent: what its children send waits for it
	hellos    helloState    // its subtree's hellos, combined (hello.go)
	closing   closeState    // the closing broadcast's answer, combined for the subtree
	vertOnce  sync.Once
	verts     map[string]int // node name -> vertex

	closeOnce sync.Once
	closed    atomic.Bool // the launcher said close
	gone      chan string
}

func (n *node) end(why string) {
	select {
	case n.gone <- why:
	default:
	}
}
func (n *node) closeDaemon() {
	n.closeOnce.Do(func() {
		n.stdin.close()
		if n.d != nil {
			n.d.Close()
		}
	})
}

// sendUp sends m (a body of this package's message types; nil: none) to
// the launcher.
func (n *node) sendUp(typ uint8, m any) error {
	b, err := wire.Encode(m)
	if err != nil {
		return err
	}
	return n.up.Send(typ, wire.Frame(wire.ToLauncher, uint32(n.me), b))
}

// askUp sends a request to the launcher; done gets the answer, or the
// link's failure.
func askUp[A any](n *node, typ uint8, req wire.IdSetter, done func(A, error)) {
	wire.Ask(&n.calls, req, func() error { return n.sendUp(typ, req) }, done)
}

// replyUp answers the launcher's request id.
func replyUp[A any](n *node, id uint64, a A, err error) {
	n.up.Send(wire.TReply, wire.Frame(wire.ToLauncher, uint32(n.me), wire.EncodeReply(id, a, err)))
}

// readParent handles what comes down: messages for this node, for every
// node (broadcasts), and for nodes below, which it passes on.
func (n *node) readParent() {
	for {
		f, err := n.parent.Recv()
		if err != nil {
			if silent := (*ctl.SilentError)(nil); errors.As(err, &silent) {
				// Its last word, before its ranks are killed (and their
				// deaths reported), where the link still carries one: a
				// launcher that was stopped reads it once it runs again.
				why := fmt.Sprintf("no heartbeat from the launcher for %v", silent.After)
				if p := ctl.Parent(n.me, n.boot.Fanout); p != 0 {
					why = fmt.Sprintf("no heartbeat from %s's daemon for %v", n.boot.Hosts[p-1], silent.After)
				}
				n.sendUp(wire.TGaveUp, &wire.NodeErr{Host: n.host, Err: why})
			}
			n.end("lost the link to the launcher: " + err.Error())
			return
		}
		dest, _, body, err := wire.Header(f.Payload)
		if err != nil {
			continue
		}
		switch {
		case dest == wire.ToBroadcast:
			if f.Type == wire.TCollFail {
				// Failed here before below: a member that hears of a timeout
				// may construct again at once, and its next contribution must
				// not find the failed collective still pending above it.
				if err := n.handle(f.Type, body); err != nil {
					n.end(err.Error())
					return
				}
				if n.kids != nil {
					n.kids.Broadcast(f.Type, f.Payload)
				}
				continue
			}
			if n.kids != nil {
				n.kids.Broadcast(f.Type, f.Payload)
			}
		case int(dest) != n.me:
			if n.kids != nil {
				n.kids.Send(int(dest), f.Type, f.Payload)
			}
			continue
		}
		switch f.Type {
		case wire.TStdin:
			ns, p, err := wire.SplitStream(body)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.stdin.write(ns, p)
			continue
		case wire.TPreload:
			if err := n.receivePreload(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case wire.TBatch: // acknowledgements of output, for this subtree (ackdown.go)
			if err := n.ackBatch(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case wire.TOutputAck:
			k, key, grant, err := wire.DecodeOutAck(body, 1<<40)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.out.Ack(k, key, grant)
			continue
		}
		if err := n.handle(f.Type, body); err != nil {
			// The stream from the launcher cannot be read past this: a
			// daemon that no longer understands it is lost.
			n.end(err.Error())
			return
		}
	}
}

// handle handles a message for this daemon; an error is one it cannot read.
func (n *node) handle(typ uint8, body []byte) error {
	switch typ {
	case wire.TReply:
		n.calls.Answered(body)
	case wire.TLaunch:
		n.launch(body)
	case wire.TSignal:
		return wire.On(body, func(m *wire.Signal) {
			n.d.Signal(m.Nspace, m.Ranks, syscall.Signal(m.Sig))
		})
	case wire.TForget:
		return wire.On(body, func(m *wire.Forget) {
			n.stdin.drop(m.Nspace)
			n.coll.Forget(m.Nspace)
			go n.d.Forget(m.Nspace) // it waits for the job's ranks to be reaped
		})
	case wire.TServeDmodex:
		return wire.On(body, func(m *wire.DmodexReq) {
			n.d.ServeDirectModex(m.Proc, func(data []byte, err error) { replyUp(n, m.ID, data, err) })
		})
	case wire.TDeliver:
		return wire.On(body, n.deliver)
	case wire.TGather:
		return wire.On(body, n.gatherHere)
	case wire.TInspect:
		return wire.On(body, func(m *wire.InspectReq) {
			replyUp(n, m.ID, n.d.Inspect(m.Nspace, m.Stacks), nil)
		})
	case wire.TSuspend, wire.TResume:
		n.suspend(typ == wire.TSuspend)
	case wire.TCollDone:
		return n.collDone(body)
	case wire.TCollFail:
		return wire.On(body, n.collFail)
	case wire.TRespawn:
		return wire.On(body, func(m *wire.Respawn) {
			if n.kids != nil && ctl.Parent(m.Vertex, n.boot.Fanout) == n.me {
				n.kids.Relaunch(m.Vertex)
			}
		})
	case wire.TCollRevive:
		return wire.On(body, func(m *wire.CollRevive) {
			if back, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts)); err == nil {
				n.coll.Revive(back)
			}
		})
	case wire.TClose:
		n.closeNow()
	}
	return nil
}

// launch registers the plan's job and starts its local ranks, if any.
func (n *node) launch(body []byte) {
	trace.Mark("launch")
	var p daemon.Plan
	if err := json.Unmarshal(body, &p); err != nil {
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: "bad launch plan: " + err.Error()})
		return
	}
	for i := range p.Map.Nodes {
		if p.Map.Nodes[i].Name == n.host {
			p.Map.Nodes[i].Topo = n.topo
		}
	}
	trace.Mark("plan read")
	if err := n.d.Launch(&p); err != nil {
		n.launchFailed(&p, err)
	}
}

// deliver hands an event to the node's PMIx server, unless raised here.
func (n *node) deliver(m *wire.Notify) {
	if m.Skip == n.host {
		return // raised here, and delivered here then
	}
	// Off the link's reader: the library may hold an event (its debugger
	// aggregator does) before it calls back.
	n.d.DeliverEventAsync(m.Status, m.Source, m.Range, m.Info)
}

// suspend: the launcher stops (Ctrl-Z) or continues. Only the launcher
// stops: a daemon below another hears that one's heartbeats throughout.
func (n *node) suspend(stop bool) {
	if ctl.Parent(n.me, n.boot.Fanout) != 0 {
		return
	}
	if stop {
		n.parent.Suspend()
	} else {
		n.parent.Resume()
	}
}

// collDone is a collective's result, on its way down.
func (n *node) collDone(body []byte) error {
	var m wire.CollResult
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return err
	}
	n.coll.Result(m.Coll, data, m.CollErr())
	return nil
}

// collFail fails collectives: one that timed out, those of lost nodes, or
// those of a dead process (a group member).
func (n *node) collFail(m *wire.CollFail) {
	if m.Coll != "" {
		n.coll.TimedOut(m.Coll, m.Gen, m.CollErr())
	}
	for _, p := range m.Procs {
		n.coll.FailProc(p, m.CollErr())
	}
	if len(m.Verts) > 0 {
		lost, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts))
		if err == nil {
			n.coll.Fail(lost, m.CollErr())
		}
	}
}

// closeNow kills and reaps everything, then says so; the launcher closes
// the link after every node has answered, which ends this process.
func (n *node) closeNow() {
	trace.Mark("close")
	n.closed.Store(true)
	n.closeDaemon()
	n.closedHere()
	if n.boot.Agent == wire.AgentSlurm {
		// A daemon of the Slurm step (a leaf: every daemon is the
		// launcher's child) has answered: it ends now rather than when
		// the launcher closes its link, so that Slurm's record of the
		// step's end, which prun waits for, starts sooner.
		n.end("closed")
	}
}

// launchFailed reports every local rank of a plan the daemon refused.
func (n *node) launchFailed(p *daemon.Plan, err error) {
	for _, nd := range p.Map.Nodes {
		if nd.Name != n.host {
			continue
		}
		for _, r := range nd.Procs {
			n.Event(daemon.Event{Kind: daemon.LaunchFailed, Nspace: p.Nspace, Rank: r, Node: n.host, Msg: err.Error()})
		}
	}
	n.Event(daemon.Event{Kind: daemon.NodeJobDone, Nspace: p.Nspace, Node: n.host})
}
