package remote

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"sync"
	"time"

	"prun/daemon"
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
)

// Vertex addresses in a frame's routing header.
const (
	toLauncher  = 0
	toBroadcast = 0xffffffff
)

// msg is every message body: one struct with the fields of all of them,
// gob leaves out the empty ones.
type msg struct {
	ID   uint64
	Host string
	Err  string
	Code int32 // a pmixsrv.Status, when Err is one

	Topo    string // hello: synthetic topology, or
	TopoXML []byte // ... the node's hwloc XML
	Pid     int

	Event *daemon.Event

	Kind    string
	Procs   []pmixsrv.Proc
	Proc    pmixsrv.Proc
	Data    []byte
	Status  pmixsrv.Status
	Range   pmixsrv.DataRange
	Info    []pmixsrv.Info
	Sig     int
	Apps    []daemon.SpawnApp
	Preput  [][2]string
	Entries []names.Entry
	Keys    []string
	Wait    bool
	Timeout time.Duration
	Pub     string
	Names   []string
	Table   []pmixsrv.ProcInfo
	Nspace  string
	Ranks   []int
	Plan    []byte // JSON of a daemon.Plan
	States  []daemon.RankState
	Src     iof.Source
	Stream  iof.Stream
}

func init() {
	// Concrete types that travel as interface values (pmixsrv.Info.Value,
	// names.Entry.Value); gob knows the basic ones.
	for _, v := range []any{pmixsrv.NodeMap(""), pmixsrv.ProcMap(""), pmixsrv.Rank(0), pmixsrv.Size(0),
		pmixsrv.Pid(0), pmixsrv.Status(0), pmixsrv.DataRange(0), pmixsrv.Persistence(0), pmixsrv.Proc{},
		[]pmixsrv.Proc{}, []pmixsrv.Info{}, []pmixsrv.ProcInfo{}} {
		gob.Register(v)
	}
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

// A msg body starts with a byte saying how to read the gob after it.
// Between one sender and one receiver, bodies travel in order along one path
// of the tree, so each such pair keeps a gob stream: type descriptions go in
// the stream's first body only, later bodies carry values (a fresh encoder
// per message sent 1.2 KB of types and cost 50 us of reflection on each
// side). Broadcasts, read by every node, are self-contained.
const (
	bodyAlone   byte = iota // a gob of its own
	bodyStream              // the next value of the sender's stream
	bodyRestart             // a new stream from the sender starts here
)

// encode makes a self-contained body.
func encode(m *msg) []byte {
	var b bytes.Buffer
	b.WriteByte(bodyAlone)
	if err := gob.NewEncoder(&b).Encode(m); err != nil {
		// Only a type gob cannot carry gets here: a programming error, but
		// the peer must still hear an answer.
		b.Reset()
		b.WriteByte(bodyAlone)
		gob.NewEncoder(&b).Encode(&msg{ID: m.ID, Err: "cannot encode message: " + err.Error()})
	}
	return b.Bytes()
}

// sendStream is one sender's stream to one receiver. send must deliver
// bodies in the order given: it runs under the stream's lock.
type sendStream struct {
	mu  sync.Mutex
	buf bytes.Buffer
	enc *gob.Encoder // nil: the next body restarts the stream
}

func (s *sendStream) send(m *msg, send func(body []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := bodyStream
	if s.enc == nil {
		s.enc, kind = gob.NewEncoder(&s.buf), bodyRestart
	}
	s.buf.Reset()
	s.buf.WriteByte(kind)
	if err := s.enc.Encode(m); err != nil {
		// The encoder may think it sent types the receiver never got.
		s.enc = nil
		return send(encode(&msg{ID: m.ID, Err: "cannot encode message: " + err.Error()}))
	}
	return send(bytes.Clone(s.buf.Bytes()))
}

// recvStream reads one sender's bodies, in the order they were sent.
type recvStream struct {
	buf bytes.Buffer
	dec *gob.Decoder // nil until a restart, and after a bad body
}

func (r *recvStream) decode(body []byte) (*msg, error) {
	if len(body) == 0 {
		return nil, errors.New("bad message: empty")
	}
	if err := checkGobLengths(body[1:]); err != nil {
		r.dec = nil // whatever it was, the stream cannot be followed past it
		return nil, fmt.Errorf("bad message: %v", err)
	}
	m := &msg{}
	switch body[0] {
	case bodyAlone:
		if err := gob.NewDecoder(bytes.NewReader(body[1:])).Decode(m); err != nil {
			return nil, fmt.Errorf("bad message: %v", err)
		}
		return m, nil
	case bodyRestart:
		r.buf.Reset()
		r.dec = gob.NewDecoder(&r.buf)
	case bodyStream:
		if r.dec == nil {
			return nil, errors.New("bad message: a stream's value without its start")
		}
	default:
		return nil, fmt.Errorf("bad message: kind %d", body[0])
	}
	r.buf.Reset()
	r.buf.Write(body[1:])
	err := r.dec.Decode(m)
	if err == nil && r.buf.Len() > 0 {
		err = fmt.Errorf("%d bytes after the value", r.buf.Len())
	}
	if err != nil {
		r.dec = nil // its state is undefined now
		return nil, fmt.Errorf("bad message: %v", err)
	}
	return m, nil
}

// checkGobLengths checks that every gob message in b fits in b: gob
// allocates whatever length a message claims before reading it, so a frame
// of a few bytes could otherwise cost a gigabyte.
func checkGobLengths(b []byte) error {
	for len(b) > 0 {
		n, hdr := uint64(b[0]), 1
		if b[0] >= 0x80 { // the negated count of big-endian bytes that follow
			k := 256 - int(b[0])
			if k > 8 || len(b) < 1+k {
				return errors.New("bad gob length")
			}
			n = 0
			for _, c := range b[1 : 1+k] {
				n = n<<8 | uint64(c)
			}
			hdr = 1 + k
		}
		if n > uint64(len(b)-hdr) {
			return fmt.Errorf("a gob message of %d bytes in %d", n, len(b)-hdr)
		}
		b = b[hdr+int(n):]
	}
	return nil
}

// Output runs are the bulk of the traffic: a binary body, no gob.
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
