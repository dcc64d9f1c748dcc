package remote

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"prun/daemon"
	"prun/internal/jsonbytes"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
)

// Message types. Up: daemon to launcher; down: launcher to daemon(s).
const (
	tHello       uint8 = iota + 1 // up: a daemon is ready (its topology)
	tFailed                       // up: a node could not be started, or its link was lost
	tOutput                       // up: a run of a rank's output (binary body)
	tSourceInfo                   // up
	tEnd                          // up
	tEvent                        // up
	tFence                        // up, replied
	tDmodex                       // up, replied
	tNotify                       // up
	tJobControl                   // up, replied
	tSpawn                        // up, replied
	tPublish                      // up, replied
	tLookup                       // up, replied
	tUnpublish                    // up, replied
	tNamespaces                   // up, replied
	tProcTable                    // up, replied
	tReply                        // either way: the answer to a request
	tLaunch                       // down
	tSignal                       // down
	tServeDmodex                  // down, replied
	tDeliver                      // down
	tInspect                      // down, replied
	tClose                        // down (broadcast), replied
	tStdin                        // down: the launcher's stdin for a job's ranks here
	tStdinAck                     // up: stdin bytes this node's ranks took (binary body)
	tStdinDone                    // up: no rank of this node reads stdin any more (no body)
	tPreload                      // down: a chunk of what the next plan preloads (binary body)
	tPreloadAck                   // up: preload bytes this node has written (binary body)
	tOutputAck                    // down: output bytes the launcher has written, maybe a grant (binary body; output.go)
	tSuspend                      // down (broadcast): the launcher stops (Ctrl-Z); expect no heartbeats
	tResume                       // down (broadcast): the launcher is back; expect heartbeats
	tGaveUp                       // up: a daemon's last word: its parent fell silent (Err says so)
	tColl                         // up: a subtree's combined contribution to a collective (coll.go)
	tCollDone                     // down: a collective's result, to a child that contributed
	tCollFail                     // down (broadcast): nodes lost; their collectives fail
	tClosed                       // up: a subtree closed (Count: its daemons that did), the closing broadcast's answer
	tForget                       // down: a persistent runtime's job is over: drop it (daemon.Daemon.Forget)
)

// Vertex addresses in a frame's routing header.
const (
	toLauncher  = 0
	toBroadcast = 0xffffffff
)

// msg is every message body: one struct with the fields of all of them, as
// JSON that leaves out the empty ones. (encoding/gob, which carried them
// before, cost every start of prun its initialisation and page faults, one
// node's jobs included: 0.15 ms of an empty Go program's start.)
type msg struct {
	ID   uint64 `json:",omitzero"`
	Host string `json:",omitzero"`
	Err  string `json:",omitzero"`
	Code int32  `json:",omitzero"` // a pmixsrv.Status, when Err is one

	Topo    string `json:",omitzero"` // hello: synthetic topology, or
	TopoXML []byte `json:",omitzero"` // ... the node's hwloc XML
	Pid     int    `json:",omitzero"`

	Event *daemon.Event `json:",omitzero"`

	Kind    string             `json:",omitzero"`
	Procs   []pmixsrv.Proc     `json:",omitzero"`
	Proc    pmixsrv.Proc       `json:",omitzero"`
	Data    []byte             `json:",omitzero"`
	Status  pmixsrv.Status     `json:",omitzero"`
	Range   pmixsrv.DataRange  `json:",omitzero"`
	Info    []pmixsrv.Info     `json:",omitzero"` // values keep their types (pmixsrv/json.go)
	Sig     int                `json:",omitzero"`
	Apps    []daemon.SpawnApp  `json:",omitzero"`
	Preput  jsonbytes.Pairs    `json:",omitzero"` // the user's bytes (jsonbytes): also Pub, Keys, entries
	Entries entries            `json:",omitzero"`
	Keys    jsonbytes.Strings  `json:",omitzero"`
	Wait    bool               `json:",omitzero"`
	Timeout time.Duration      `json:",omitzero"`
	Pub     jsonbytes.String   `json:",omitzero"`
	Names   []string           `json:",omitzero"`
	Table   []pmixsrv.ProcInfo `json:",omitzero"`
	Nspace  string             `json:",omitzero"`
	Ranks   []int              `json:",omitzero"`
	Plan    json.RawMessage    `json:",omitzero"` // a daemon.Plan
	States  []daemon.RankState `json:",omitzero"`
	Src     iof.Source         `json:",omitzero"`
	Stream  iof.Stream         `json:",omitzero"`
	Coll    string             `json:",omitzero"` // a collective's key (coll.go)
	Verts   []int              `json:",omitzero"` // vertices, as ranges (packVerts)
	Count   int                `json:",omitzero"`
}

// entries are published names; their values keep their types.
type entries []names.Entry

type entry struct {
	Key       jsonbytes.String
	Value     json.RawMessage
	Publisher jsonbytes.String `json:",omitzero"`
	FirstRead bool             `json:",omitzero"`
}

func (es entries) MarshalJSON() ([]byte, error) {
	w := make([]entry, len(es))
	for i, e := range es {
		v, err := pmixsrv.MarshalValue(e.Value)
		if err != nil {
			return nil, fmt.Errorf("name %s: %w", e.Key, err)
		}
		w[i] = entry{Key: jsonbytes.String(e.Key), Value: v, Publisher: jsonbytes.String(e.Publisher), FirstRead: e.FirstRead}
	}
	return json.Marshal(w)
}

func (es *entries) UnmarshalJSON(b []byte) error {
	var w []entry
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := make(entries, len(w))
	for i, e := range w {
		v, err := pmixsrv.UnmarshalValue(e.Value)
		if err != nil {
			return fmt.Errorf("name %s: %w", e.Key, err)
		}
		out[i] = names.Entry{Key: string(e.Key), Value: v, Publisher: string(e.Publisher), FirstRead: e.FirstRead}
	}
	*es = out
	return nil
}

// frame is a routed frame: dest and src vertices, then the body.
func frame(dest, src uint32, body []byte) []byte {
	b := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(b, dest)
	binary.BigEndian.PutUint32(b[4:], src)
	return append(b, body...)
}

func header(p []byte) (dest, src uint32, body []byte, err error) {
	if len(p) < 8 {
		return 0, 0, nil, errors.New("frame without a routing header")
	}
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), p[8:], nil
}

// encode makes a message's body.
func encode(m *msg) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Only a value that cannot travel gets here: a programming error,
		// but the peer must still hear an answer.
		b, _ = json.Marshal(&msg{ID: m.ID, Err: "cannot encode message: " + err.Error()})
	}
	return b
}

// decode reads a message's body.
func decode(body []byte) (*msg, error) {
	m := &msg{}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("bad message: %v", err)
	}
	return m, nil
}

// Output runs are the bulk of the traffic: a binary body, no JSON.
// job, app, rank (int32 each), stream, partial, then the bytes.
func encodeOutput(src iof.Source, st iof.Stream, p []byte, partial bool) []byte {
	b := make([]byte, 14, 14+len(p))
	binary.BigEndian.PutUint32(b, uint32(src.Job))
	binary.BigEndian.PutUint32(b[4:], uint32(src.App))
	binary.BigEndian.PutUint32(b[8:], uint32(src.Rank))
	b[12] = byte(st)
	if partial {
		b[13] = 1
	}
	return append(b, p...)
}

func decodeOutput(b []byte) (iof.Source, iof.Stream, []byte, bool, error) {
	if len(b) < 14 {
		return iof.Source{}, 0, nil, false, errors.New("short output message")
	}
	src := iof.Source{Job: int(int32(binary.BigEndian.Uint32(b))), App: int(int32(binary.BigEndian.Uint32(b[4:]))),
		Rank: int(int32(binary.BigEndian.Uint32(b[8:])))}
	return src, iof.Stream(b[12]), b[14:], b[13] == 1, nil
}

// errOf turns an error into a message's Err/Code, keeping PMIx statuses.
func errOf(m *msg, err error) *msg {
	if err == nil {
		return m
	}
	m.Err = err.Error()
	var st pmixsrv.Status
	if errors.As(err, &st) {
		m.Code = int32(st)
	}
	return m
}

// err is the error a reply carries.
func (m *msg) err() error {
	switch {
	case m.Code != 0:
		return pmixsrv.Status(m.Code)
	case m.Err != "":
		return errors.New(m.Err)
	}
	return nil
}

// calls matches replies to requests. When the link goes, every pending
// request fails: no caller waits for ever on a lost node.
type calls struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]func(*msg)
	dead error
}

func (c *calls) add(f func(*msg)) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return 0, false
	}
	if c.m == nil {
		c.m = map[uint64]func(*msg){}
	}
	c.next++
	c.m[c.next] = f
	return c.next, true
}

// call sends request m with send; reply gets the answer, or the failure
// of the link or of the send.
func (c *calls) call(m *msg, send func(*msg) error, reply func(*msg)) {
	id, ok := c.add(reply)
	if !ok {
		reply(errOf(&msg{}, c.err()))
		return
	}
	m.ID = id
	if err := send(m); err != nil {
		if f := c.take(id); f != nil {
			f(errOf(&msg{}, err))
		}
	}
}

func (c *calls) take(id uint64) func(*msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.m[id]
	delete(c.m, id)
	return f
}

// fail ends every pending request, and any later one, with err.
func (c *calls) fail(err error) {
	c.mu.Lock()
	pending := c.m
	c.m = nil
	if c.dead == nil {
		c.dead = err
	}
	c.mu.Unlock()
	for _, f := range pending {
		f(errOf(&msg{}, err))
	}
}

func (c *calls) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}
