package wire

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

// Message types. Up: daemon to launcher; down: launcher to daemon(s). The
// body of each is named beside it: a struct of this file (JSON, leaving
// out empty fields), a binary body, or none.
const (
	THello       uint8 = iota + 1 // up: a daemon is ready (hello)
	TFailed                       // up: a node could not be started, or its link was lost (nodeErr)
	TOutput                       // up: a run of a rank's output (binary: encodeOutput)
	TSourceInfo                   // up: where a rank runs (rankSource)
	TEnd                          // up: a rank's stream ended (streamEnd)
	TEvent                        // up: a daemon.Event
	TFence                        // up, replied: a collective the daemon could not place (fenceReq; reply: data)
	TDmodex                       // up, replied: a rank's data from its node (dmodexReq; reply: data)
	TNotify                       // up: a PMIx event to deliver (notify)
	TJobControl                   // up, replied: signal ranks (jobControlReq)
	TSpawn                        // up, replied: start a job (spawnReq; reply: its namespace)
	TPublish                      // up, replied: publish names (publishReq)
	TLookup                       // up, replied: look names up (lookupReq; reply: entries)
	TUnpublish                    // up, replied: unpublish names (unpublishReq)
	TNamespaces                   // up, replied: the running namespaces (request; reply: names)
	TProcTable                    // up, replied: a namespace's processes (nspaceReq; reply: proc table)
	TReply                        // either way: the answer to a request (encodeReply)
	TLaunch                       // down (broadcast): a daemon.Plan
	TSignal                       // down: signal ranks (signal)
	TServeDmodex                  // down, replied: this node's rank's data (dmodexReq; reply: data)
	TDeliver                      // down: deliver a PMIx event to local ranks (notify)
	TInspect                      // down, replied: the ranks' states (inspectReq; reply: states)
	TClose                        // down (broadcast): end (no body); answered by tClosed
	TStdin                        // down: the launcher's stdin for a job's ranks here (binary: stdin.go; remote/nodeside/stdin.go)
	TStdinAck                     // up: stdin bytes a job's ranks here took (binary: stdin.go; remote/nodeside/stdin.go)
	TStdinDone                    // up: no rank of a job here reads stdin any more (binary: stdin.go; remote/nodeside/stdin.go)
	TPreload                      // down: a chunk of what the next plan preloads (binary)
	TPreloadAck                   // up: preload bytes this node has written (binary)
	TOutputAck                    // down: output bytes the launcher has written, maybe a grant (binary; output.go)
	TSuspend                      // down (broadcast): the launcher stops (Ctrl-Z); expect no heartbeats (no body)
	TResume                       // down (broadcast): the launcher is back; expect heartbeats (no body)
	TGaveUp                       // up: a daemon's last word: its parent fell silent (nodeErr)
	TColl                         // up: a subtree's combined contribution to a collective (collUp; coll.go)
	TCollDone                     // down: a collective's result, to a child that contributed (collResult)
	TCollFail                     // down (broadcast): nodes lost; their collectives fail (collFail)
	TClosed                       // up: a subtree closed, the closing broadcast's answer (closed)
	TForget                       // down: a persistent runtime's job is over: drop it (forget)
	THellos                       // up: a subtree's hellos, its root's first: one start-up message per vertex (subtreeHellos)
	TBatch                        // up: frames a vertex had queued, sent as one (binary: batch.go)
	TRespawn                      // down: start your child's daemon again, a lost one's (respawn; remote/revive.go)
	TCollRevive                   // down (broadcast): lost nodes are back; their collectives go on (collRevive; remote/revive.go)
	TGather                       // down, to one vertex: gather its subtree's part of an answer (gatherReq; gather.go)
	TGathered                     // up, to the asking vertex: a subtree's part, combined (gatherReply; gather.go)
)

// Vertex addresses in a frame's routing header.
const (
	ToLauncher  = 0
	ToBroadcast = 0xffffffff
)

// Message bodies, one type per kind. They travel as JSON: encoding/gob
// would cost every start of prun its initialisation, a one-node job's
// included.

// Hello is a daemon's first word: it is up, and its node's topology.
type Hello struct {
	Vertex  int    `json:",omitzero"` // in a subtreeHellos (alone, the frame's source says it)
	Host    string `json:",omitzero"`
	Pid     int    `json:",omitzero"`
	Topo    string `json:",omitzero"` // synthetic topology, or
	TopoXML []byte `json:",omitzero"` // ... the node's hwloc XML, or
	TopoOf  int    `json:",omitzero"` // ... the vertex of a hello sent before this one over the same link, whose topology this node shares
}

// SubtreeHellos is the first word of a daemon with children: its own hello
// and those of its subtree that came in time (remote/nodeside/hello.go), its own first.
type SubtreeHellos struct {
	Hellos []Hello `json:",omitzero"`
}

// NodeErr is a node's failure (tFailed) or its daemon's last word (tGaveUp).
type NodeErr struct {
	Host string `json:",omitzero"`
	Err  string `json:",omitzero"`
}

// RankSource is where a rank's output comes from.
type RankSource struct {
	Src  iof.Source `json:",omitzero"`
	Host string     `json:",omitzero"`
	Pid  int        `json:",omitzero"`
}

// StreamEnd is a rank's stream closed: its runs have all been sent.
type StreamEnd struct {
	Src    iof.Source `json:",omitzero"`
	Stream iof.Stream `json:",omitzero"`
}

// Notify is a PMIx event: raised by a rank (up), or to deliver (down).
type Notify struct {
	Status pmixsrv.Status    `json:",omitzero"`
	Source pmixsrv.Proc      `json:",omitzero"`
	Range  pmixsrv.DataRange `json:",omitzero"`
	Info   []pmixsrv.Info    `json:",omitzero"` // values keep their types (pmixsrv/json.go)
	Skip   string            `json:",omitzero"` // a node that does not deliver it (where it was raised)
}

// Signal signals ranks of a job on one node.
type Signal struct {
	Nspace string `json:",omitzero"`
	Ranks  []int  `json:",omitzero"`
	Sig    int    `json:",omitzero"`
}

// Forget drops a job that is over.
type Forget struct {
	Nspace string `json:",omitzero"`
}

// Respawn asks a daemon to start the daemon of its child Vertex again.
type Respawn struct {
	Vertex int `json:",omitzero"`
}

// CollRevive: the nodes of Verts (as ranges: packVerts) are back.
type CollRevive struct {
	Verts []int `json:",omitzero"`
}

// Closed is a subtree's answer to the closing broadcast.
type Closed struct {
	Host  string `json:",omitzero"`
	Count int    `json:",omitzero"` // the subtree's daemons that closed
}

// Requests: each carries the id its reply answers (set by calls.call).

// Request is a request's id, and the whole of a request that asks nothing
// more (tNamespaces).
type Request struct {
	ID uint64 `json:",omitzero"`
}

func (r *Request) SetID(id uint64) { r.ID = id }

type FenceReq struct {
	Request
	Kind  string         `json:",omitzero"`
	Procs []pmixsrv.Proc `json:",omitzero"`
	Data  []byte         `json:",omitzero"`
}

type DmodexReq struct {
	Request
	Proc pmixsrv.Proc `json:",omitzero"`
}

type JobControlReq struct {
	Request
	Requester pmixsrv.Proc   `json:",omitzero"`
	Targets   []pmixsrv.Proc `json:",omitzero"`
	Sig       int            `json:",omitzero"`
}

type SpawnReq struct {
	Request
	Parent pmixsrv.Proc      `json:",omitzero"`
	Apps   []daemon.SpawnApp `json:",omitzero"`
	Preput jsonbytes.Pairs   `json:",omitzero"` // the user's bytes (jsonbytes), as are the names' below
}

type PublishReq struct {
	Request
	Entries Entries `json:",omitzero"`
}

type LookupReq struct {
	Request
	Keys    jsonbytes.Strings `json:",omitzero"`
	Wait    bool              `json:",omitzero"`
	Timeout time.Duration     `json:",omitzero"`
}

type UnpublishReq struct {
	Request
	Publisher jsonbytes.String  `json:",omitzero"`
	Keys      jsonbytes.Strings `json:",omitzero"`
}

// NspaceReq asks about one namespace (tProcTable).
type NspaceReq struct {
	Request
	Nspace string `json:",omitzero"`
}

type InspectReq struct {
	Request
	Nspace string `json:",omitzero"`
	Stacks bool   `json:",omitzero"` // wait for the ranks' stacks
}

// Status is an error that travels: a PMIx status keeps its code (Code,
// with the words in Err), any other error its words.
type Status struct {
	Err  string `json:",omitzero"`
	Code int32  `json:",omitzero"` // a pmixsrv.Status
}

func StatusOf(err error) Status {
	if err == nil {
		return Status{}
	}
	s := Status{Err: err.Error()}
	var st pmixsrv.Status
	if errors.As(err, &st) {
		s.Code = int32(st)
	}
	return s
}

// err is the error s carries.
func (s Status) err() error {
	switch {
	case s.Code != 0:
		return pmixsrv.Status(s.Code)
	case s.Err != "":
		return errors.New(s.Err)
	}
	return nil
}

// None is the answer of a request answered by its error alone.
type None = struct{}

// reply is the answer to a request: an error, or the answer A.
type reply[A any] struct {
	Status
	Name   string `json:",omitzero"` // the name service's error, which callers tell apart (nameKind)
	Answer A      `json:",omitzero"`
}

// EncodeReply makes the body of the answer to request id: the id (8 bytes,
// read before the answer's type is known), then the reply. An answer that
// cannot travel becomes its error.
func EncodeReply[A any](id uint64, a A, err error) []byte {
	r := reply[A]{Status: StatusOf(err), Name: nameKind(err), Answer: a}
	b, merr := json.Marshal(&r)
	if merr != nil {
		b, _ = json.Marshal(&reply[struct{}]{Status: Status{Err: "cannot encode message: " + merr.Error()}})
	}
	out := make([]byte, 8, 8+len(b))
	binary.BigEndian.PutUint64(out, id)
	return append(out, b...)
}

// DecodeReply reads a reply's answer (the body after its id).
func DecodeReply[A any](body []byte) (A, error) {
	var r reply[A]
	if err := json.Unmarshal(body, &r); err != nil {
		return r.Answer, fmt.Errorf("bad reply: %v", err)
	}
	if err := nameErr(r.Name); err != nil {
		return r.Answer, err
	}
	return r.Answer, r.err()
}

// ReplyID splits a reply's body.
func ReplyID(body []byte) (uint64, []byte, error) {
	if len(body) < 8 {
		return 0, nil, errors.New("short reply")
	}
	return binary.BigEndian.Uint64(body), body[8:], nil
}

// nameErr restores the name service's errors from their names.
func nameErr(name string) error {
	switch name {
	case "duplicate":
		return names.ErrDuplicate
	case "timeout":
		return names.ErrTimeout
	}
	return nil
}

func nameKind(err error) string {
	switch {
	case errors.Is(err, names.ErrDuplicate):
		return "duplicate"
	case errors.Is(err, names.ErrTimeout):
		return "timeout"
	}
	return ""
}

// Entries are published names; their values keep their types.
type Entries []names.Entry

type entry struct {
	Key       jsonbytes.String
	Value     json.RawMessage
	Publisher jsonbytes.String `json:",omitzero"`
	FirstRead bool             `json:",omitzero"`
}

func (es Entries) MarshalJSON() ([]byte, error) {
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

func (es *Entries) UnmarshalJSON(b []byte) error {
	var w []entry
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := make(Entries, len(w))
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

// Frame is a routed frame: dest and src vertices, then the body.
func Frame(dest, src uint32, body []byte) []byte {
	b := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(b, dest)
	binary.BigEndian.PutUint32(b[4:], src)
	return append(b, body...)
}

func Header(p []byte) (dest, src uint32, body []byte, err error) {
	if len(p) < 8 {
		return 0, 0, nil, errors.New("frame without a routing header")
	}
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), p[8:], nil
}

// Encode makes a message's body (nil: none). Only a value that cannot
// travel fails: a request fails its call with it (calls.call).
func Encode(m any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cannot encode message: %v", err)
	}
	return b, nil
}

// Decode reads a message's body into m.
func Decode(body []byte, m any) error {
	if err := json.Unmarshal(body, m); err != nil {
		return fmt.Errorf("bad message: %v", err)
	}
	return nil
}

// Output runs are the bulk of the traffic: a binary body, no JSON.
// job, app, rank (int32 each), stream, partial, then the bytes.
func EncodeOutput(src iof.Source, st iof.Stream, p []byte, partial bool) []byte {
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

func DecodeOutput(b []byte) (iof.Source, iof.Stream, []byte, bool, error) {
	if len(b) < 14 {
		return iof.Source{}, 0, nil, false, errors.New("short output message")
	}
	src := iof.Source{Job: int(int32(binary.BigEndian.Uint32(b))), App: int(int32(binary.BigEndian.Uint32(b[4:]))),
		Rank: int(int32(binary.BigEndian.Uint32(b[8:])))}
	return src, iof.Stream(b[12]), b[14:], b[13] == 1, nil
}

// IdSetter is a request: calls.call numbers it.
type IdSetter interface{ SetID(uint64) }

// Calls matches replies to requests. When the link goes, every pending
// request fails: no caller waits for ever on a lost node.
type Calls struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]func([]byte, error)
	dead error
}

func (c *Calls) Add(f func([]byte, error)) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return 0, false
	}
	if c.m == nil {
		c.m = map[uint64]func([]byte, error){}
	}
	c.next++
	c.m[c.next] = f
	return c.next, true
}

// call numbers req and sends it with send; answer gets the reply's body,
// or the failure of the link or of the send.
func (c *Calls) call(req IdSetter, send func() error, answer func([]byte, error)) {
	id, ok := c.Add(answer)
	if !ok {
		answer(nil, c.err())
		return
	}
	req.SetID(id)
	if err := send(); err != nil {
		if f := c.take(id); f != nil {
			f(nil, err)
		}
	}
}

// Answered hands a reply (a tReply body) to its caller.
func (c *Calls) Answered(body []byte) {
	id, b, err := ReplyID(body)
	if err != nil {
		return
	}
	if f := c.take(id); f != nil {
		f(b, nil)
	}
}

// Ask sends req (with send) and hands done the answer, an A.
func Ask[A any](c *Calls, req IdSetter, send func() error, done func(A, error)) {
	c.call(req, send, func(body []byte, err error) {
		var a A
		if err == nil {
			a, err = DecodeReply[A](body)
		}
		done(a, err)
	})
}

func (c *Calls) take(id uint64) func([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.m[id]
	delete(c.m, id)
	return f
}

// Fail ends every pending request, and any later one, with err.
func (c *Calls) Fail(err error) {
	c.mu.Lock()
	pending := c.m
	c.m = nil
	if c.dead == nil {
		c.dead = err
	}
	c.mu.Unlock()
	for _, f := range pending {
		f(nil, err)
	}
}

func (c *Calls) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// On decodes body as an M and hands it to f.
func On[M any](body []byte, f func(*M)) error {
	var m M
	if err := Decode(body, &m); err != nil {
		return err
	}
	f(&m)
	return nil
}
