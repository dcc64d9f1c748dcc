package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/pmixsrv"
)

// Collectives (PMIx fences, PMI barriers, connect and disconnect, group
// construct and destruct) combine along the tree: a vertex waits for its
// own node's contribution (when its node takes part) and for one combined
// contribution from each child whose subtree holds a participant, sends one
// contribution up, and hands the result down once per child that
// contributed. The launcher is vertex 0 of the same combination (Root): it
// combines its children's contributions and its own node's, completes the
// collective (Root.Finish: a group's context id is assigned there), and
// decides failures: a lost node, or a group member's death, is broadcast
// down (tCollFail) and fails every pending collective it takes part in.
//
// A collective is keyed by its kind and its participants (namespace and
// ranks), so the collectives of several jobs, or of disjoint groups of one
// job, run at once. One key is pending at most once at a vertex: a
// participant enters the next collective of the same participants only
// after the result of the previous one came down through every vertex
// between it and the launcher, and each vertex forgets the key before it
// passes the result on.

// CollKey is a collective's key.
func CollKey(kind string, procs []pmixsrv.Proc) string {
	s := make([]string, len(procs))
	for i, p := range procs {
		s[i] = p.String()
	}
	sort.Strings(s)
	return kind + "|" + strings.Join(s, ",")
}

// Coll is one collective pending at a vertex.
type Coll struct {
	Kind   string
	Procs  []pmixsrv.Proc
	Verts  []int        // the participants' vertices (0: the launcher's node)
	expect map[int]bool // the contributors: this vertex, children
	data   map[int][]byte
	dones  []func([]byte, error)
	froms  []int // the contributor of each done
	sent   bool  // combined and sent up: waiting for the result
	// A group construct or destruct with PMIX_TIMEOUT: gen is the key's failure
	// generation when it began here (failGen), timer reports its expiry.
	Gen     uint64
	timer   *time.Timer
	expired bool // reported (a daemon) or failed (the root)
}

// Collectives are the collectives pending at one vertex.
type Collectives struct {
	me, Fanout int
	// up sends a combined contribution to the parent (a daemon's vertex);
	// finish completes it (the launcher's: up is nil).
	up     func(key string, c *Coll, data []byte)
	Finish func(c *Coll, all []byte) ([]byte, error)

	// Expire reports a timed-out collective (key, its generation, the
	// participants' vertices whose contributions did not come) to whoever
	// decides: a daemon sends it up, the root decides (Root.timedOut).
	Expire func(key string, c *Coll, missing []int)

	Mu      sync.Mutex
	Pending map[string]*Coll
	lost    map[int]error          // vertices the launcher declared lost
	dead    map[pmixsrv.Proc]error // processes the launcher declared dead (failsOnDeath kinds)
	// Ended are, per namespace, the ranks whose end (any end, exit 0
	// included) passed this vertex on its way to the launcher (procEnded):
	// a group operation naming one cannot complete.
	Ended map[string]*RankSet
	// failGen counts, per key, the timeouts the root decided: at the root,
	// those it decided; at a daemon, the last one that came down. A
	// collective begun after a timeout came down is a new one: a stale
	// report or a repeated failure of the old one cannot touch it.
	failGen map[string]uint64
}

func NewCollectives(me, fanout int, up func(string, *Coll, []byte)) *Collectives {
	return &Collectives{me: me, Fanout: fanout, up: up, Pending: map[string]*Coll{}, lost: map[int]error{},
		dead: map[pmixsrv.Proc]error{}, failGen: map[string]uint64{}, Ended: map[string]*RankSet{}}
}

// GroupConstruct is the kind prefix of a PMIx group's construction (the
// kind is the prefix and the group's name): a member's death fails it, and
// a destruct of a group with a dead member.
const GroupConstruct = daemon.GroupConstructKind

// failsOnDeath says whether a participant's death fails collectives of
// kind. Fences and barriers are left to the job's end policy, as before.
func failsOnDeath(kind string) bool {
	return strings.HasPrefix(kind, GroupConstruct) || strings.HasPrefix(kind, daemon.GroupDestructKind)
}

// involves says whether procs names p (itself, or its whole namespace).
func involves(procs []pmixsrv.Proc, p pmixsrv.Proc) bool {
	for _, q := range procs {
		if q.Nspace == p.Nspace && (q.Rank == p.Rank || q.Rank == pmixsrv.RankWildcard) {
			return true
		}
	}
	return false
}

// deadIn is the error of a dead participant of a collective of kind among
// procs, if any (cs.mu held).
func (cs *Collectives) deadIn(kind string, procs []pmixsrv.Proc) error {
	if len(cs.dead) == 0 || !failsOnDeath(kind) {
		return nil
	}
	for p, err := range cs.dead {
		if involves(procs, p) {
			return err
		}
	}
	return nil
}

// contributors are the vertices that contribute to a collective of
// participants verts at vertex me: me itself when it takes part, and each
// child with a participant in its subtree.
func contributors(me, fanout int, verts []int) map[int]bool {
	out := map[int]bool{}
	for _, w := range verts {
		if w == me {
			out[me] = true
		} else if hop := ctl.NextHop(me, w, fanout); hop > 0 {
			out[hop] = true
		}
	}
	return out
}

// Contribute adds from's contribution (me's own node, or a child's
// combined one); done gets the result or the collective's failure.
func (cs *Collectives) Contribute(from int, key, kind string, procs []pmixsrv.Proc, verts []int, data []byte, done func([]byte, error)) {
	cs.Mu.Lock()
	for _, w := range verts {
		if err := cs.lost[w]; err != nil {
			cs.Mu.Unlock()
			done(nil, err)
			return
		}
	}
	if err := cs.deadIn(kind, procs); err != nil {
		cs.Mu.Unlock()
		done(nil, err)
		return
	}
	c := cs.Pending[key]
	if c == nil || !c.sent {
		if err := cs.endedIn(kind, procs); err != nil {
			cs.Mu.Unlock()
			done(nil, err)
			cs.failPending(key, c, err)
			return
		}
	}
	if c == nil {
		c = &Coll{Kind: kind, Procs: procs, Verts: verts, expect: contributors(cs.me, cs.Fanout, verts), data: map[int][]byte{},
			Gen: cs.failGen[key]}
		cs.Pending[key] = c
	}
	var bad error
	switch {
	case c.sent, c.data[from] != nil:
		bad = fmt.Errorf("%s: a second contribution from vertex %d before the result", kind, from)
	case !c.expect[from]:
		bad = fmt.Errorf("%s: a contribution from vertex %d, which takes no part", kind, from)
	}
	if bad != nil {
		cs.Mu.Unlock()
		done(nil, bad)
		return
	}
	if data == nil {
		data = []byte{}
	}
	c.data[from] = data
	c.dones = append(c.dones, done)
	c.froms = append(c.froms, from)
	if len(c.data) < len(c.expect) {
		if c.timer == nil && cs.Expire != nil && failsOnDeath(kind) { // a group's construct or destruct
			if d := daemon.GroupTimeoutOf(data); d > 0 {
				c.timer = time.AfterFunc(d, func() { cs.timeout(key, c) })
			}
		}
		cs.Mu.Unlock()
		return
	}
	if c.expired {
		// Reported timed out: the launcher fails it (every report is
		// answered so); what came late must not go up as a contribution
		// to the next construct of the key.
		cs.Mu.Unlock()
		return
	}
	c.sent = true
	if c.timer != nil {
		c.timer.Stop()
	}
	all := combine(c.data)
	cs.Mu.Unlock()
	if cs.Finish != nil {
		res, err := cs.Finish(c, all)
		cs.Result(key, res, err)
		return
	}
	cs.up(key, c, all)
}

// timeout reports that collective c (key) is still waiting for a
// contributor when its PMIX_TIMEOUT passed: the root decides its failure.
func (cs *Collectives) timeout(key string, c *Coll) {
	cs.Mu.Lock()
	if cs.Pending[key] != c || c.sent || c.expired {
		cs.Mu.Unlock()
		return
	}
	c.expired = true
	// The participants' vertices whose contributions would come through a
	// contributor that did not: the late members are on one or more.
	var missing []int
	for _, w := range c.Verts {
		hop := w
		if w != cs.me {
			if hop = ctl.NextHop(cs.me, w, cs.Fanout); hop <= 0 {
				continue
			}
		}
		if c.data[hop] == nil {
			missing = append(missing, w)
		}
	}
	cs.Mu.Unlock()
	cs.Expire(key, c, missing)
}

// Stale says whether a child's contribution of failure generation gen to
// collective key belongs to one that timed out: the failure came down
// here before it came up, and the child forgot it too.
func (cs *Collectives) Stale(key string, gen uint64) bool {
	cs.Mu.Lock()
	defer cs.Mu.Unlock()
	return gen < cs.failGen[key]
}

// TimedOut drops collective key of generation below gen, which the root
// failed with err (a timeout), and fails this node's own contributions to
// it; the other vertices' hear it from the root too. It reports whether
// this is news (not a repeat of a failure already seen).
func (cs *Collectives) TimedOut(key string, gen uint64, err error) bool {
	cs.Mu.Lock()
	if cs.failGen[key] >= gen {
		cs.Mu.Unlock()
		return false
	}
	cs.failGen[key] = gen
	c := cs.Pending[key]
	if c == nil || c.Gen >= gen {
		cs.Mu.Unlock()
		return true
	}
	delete(cs.Pending, key)
	if c.timer != nil {
		c.timer.Stop()
	}
	cs.Mu.Unlock()
	for i, d := range c.dones {
		if c.froms[i] == cs.me {
			d(nil, err)
		}
	}
	return true
}

// combine concatenates contributions in vertex order: every vertex below
// the launcher forwards bytes it did not reorder, so all participants get
// the same result.
func combine(data map[int][]byte) []byte {
	vs := make([]int, 0, len(data))
	size := 0
	for v, d := range data {
		vs = append(vs, v)
		size += len(d)
	}
	slices.Sort(vs)
	all := make([]byte, 0, size)
	for _, v := range vs {
		all = append(all, data[v]...)
	}
	return all
}

// Result completes the collective key with what came down (or its failure).
func (cs *Collectives) Result(key string, data []byte, err error) {
	cs.Mu.Lock()
	c := cs.Pending[key]
	delete(cs.Pending, key)
	cs.Mu.Unlock()
	if c == nil {
		return
	}
	for _, d := range c.dones {
		d(data, err)
	}
}

// Fail ends, with err, every pending collective in which a vertex of lost
// takes part, and any later one.
func (cs *Collectives) Fail(lost []int, err error) {
	cs.Mu.Lock()
	for _, w := range lost {
		if cs.lost[w] == nil {
			cs.lost[w] = err
		}
	}
	failed := cs.take(func(c *Coll) bool {
		return slices.ContainsFunc(c.Verts, func(w int) bool { return cs.lost[w] != nil })
	})
	cs.Mu.Unlock()
	end(failed, func(*Coll) error { return err })
}

// Revive forgets that the vertices back were lost: collectives with
// them go on (a persistent runtime brought their nodes back: remote/revive.go).
func (cs *Collectives) Revive(back []int) {
	cs.Mu.Lock()
	defer cs.Mu.Unlock()
	for _, w := range back {
		delete(cs.lost, w)
	}
}

// take takes the pending collectives match selects out, their timers
// stopped (cs.mu held).
func (cs *Collectives) take(match func(*Coll) bool) []*Coll {
	var taken []*Coll
	for key, c := range cs.Pending {
		if match(c) {
			taken = append(taken, c)
			delete(cs.Pending, key)
			if c.timer != nil {
				c.timer.Stop()
			}
		}
	}
	return taken
}

// end fails every contribution to the collectives cs, each with its err.
func end(cs []*Coll, err func(*Coll) error) {
	for _, c := range cs {
		e := err(c)
		for _, d := range c.dones {
			d(nil, e)
		}
	}
}

// FailProc ends, with err, every pending collective of a kind that fails
// on a participant's death in which p takes part, and any later one.
func (cs *Collectives) FailProc(p pmixsrv.Proc, err error) {
	cs.Mu.Lock()
	if cs.dead[p] == nil {
		cs.dead[p] = err
	}
	failed := cs.take(func(c *Coll) bool { return failsOnDeath(c.Kind) && involves(c.Procs, p) })
	cs.Mu.Unlock()
	end(failed, func(*Coll) error { return err })
}

// A member that ends normally (exit 0) without taking part in a group
// construct or destruct is not broadcast (an end of every rank of a large
// job, to every daemon, would cost O(ranks x nodes) frames): its end
// travels up the tree to the launcher anyway, and every vertex that can be
// waiting for its contribution is on that way (an ancestor of its node's
// vertex, or that vertex). Each of them fails its group operations naming
// the rank that still wait for their contributions (procEnded), and
// remembers the rank, so that one started later fails at once (endedIn).
// One that was combined and sent up has the rank's contribution (it came
// from below) and is left alone. A rank that called a non-blocking
// operation and ended before it completed may fail it too: its end can
// pass a vertex before its node's contribution does.

// RankSet is a set of a job's ranks, a bit each.
type RankSet struct{ Bits []uint64 }

// MaxEndedRank bounds the ranks recorded (a bit each): a job's ranks are
// far fewer; a rank beyond it is not remembered.
const MaxEndedRank = 1 << 26

func (s *RankSet) Add(r pmixsrv.Rank) {
	if r >= MaxEndedRank {
		return
	}
	if i := int(r / 64); i >= len(s.Bits) {
		s.Bits = append(s.Bits, make([]uint64, i+1-len(s.Bits))...)
	}
	s.Bits[r/64] |= 1 << (r % 64)
}

func (s *RankSet) Has(r pmixsrv.Rank) bool {
	i := int(r / 64)
	return i < len(s.Bits) && s.Bits[i]&(1<<(r%64)) != 0
}

// First is the set's lowest rank (the set is not empty).
func (s *RankSet) First() pmixsrv.Rank {
	for i, w := range s.Bits {
		if w != 0 {
			return pmixsrv.Rank(i*64 + bits.TrailingZeros64(w))
		}
	}
	return 0
}

// GroupOp is the operation ("construct", "destruct") and the group of a
// group collective's kind.
func GroupOp(kind string) (op, group string) {
	if g, ok := strings.CutPrefix(kind, daemon.GroupDestructKind); ok {
		return "destruct", g
	}
	return "construct", strings.TrimPrefix(kind, GroupConstruct)
}

// endedErr is the failure of a group operation of kind whose member p
// ended without taking part: the status of a member's death.
func endedErr(kind string, p pmixsrv.Proc) error {
	op, group := GroupOp(kind)
	return &StatusError{fmt.Sprintf("group %s: rank %d of job %s ended without taking part in its %s", group, p.Rank, p.Nspace, op),
		pmixsrv.GroupConstructAbort}
}

// endedIn is the failure of a group operation of kind among procs, one of
// whom ended, if any (cs.mu held).
func (cs *Collectives) endedIn(kind string, procs []pmixsrv.Proc) error {
	if len(cs.Ended) == 0 || !failsOnDeath(kind) {
		return nil
	}
	for _, q := range procs {
		s := cs.Ended[q.Nspace]
		switch {
		case s == nil:
		case q.Rank == pmixsrv.RankWildcard:
			return endedErr(kind, pmixsrv.Proc{Nspace: q.Nspace, Rank: s.First()})
		case s.Has(q.Rank):
			return endedErr(kind, q)
		}
	}
	return nil
}

// failPending fails collective key, c if still pending (not sent up), with
// err: every contribution it holds (cs.mu not held).
func (cs *Collectives) failPending(key string, c *Coll, err error) {
	if c == nil {
		return
	}
	cs.Mu.Lock()
	if cs.Pending[key] != c || c.sent {
		cs.Mu.Unlock()
		return
	}
	failed := cs.take(func(x *Coll) bool { return x == c })
	cs.Mu.Unlock()
	end(failed, func(*Coll) error { return err })
}

// ProcEnded records that rank p ended, its end on its way to the launcher
// through this vertex, and fails the group operations naming it that wait
// here for contributions (see rankSet).
func (cs *Collectives) ProcEnded(p pmixsrv.Proc) {
	cs.Mu.Lock()
	s := cs.Ended[p.Nspace]
	if s == nil {
		s = &RankSet{}
		cs.Ended[p.Nspace] = s
	}
	s.Add(p.Rank)
	failed := cs.take(func(c *Coll) bool { return !c.sent && failsOnDeath(c.Kind) && involves(c.Procs, p) })
	cs.Mu.Unlock()
	end(failed, func(c *Coll) error { return endedErr(c.Kind, p) })
}

// Forget drops the dead and ended processes of a namespace that is over.
func (cs *Collectives) Forget(nspace string) {
	cs.Mu.Lock()
	defer cs.Mu.Unlock()
	delete(cs.Ended, nspace)
	for p := range cs.dead {
		if p.Nspace == nspace {
			delete(cs.dead, p)
		}
	}
}

// FailAll ends every pending collective: the daemon is ending.
func (cs *Collectives) FailAll(err error) {
	cs.Mu.Lock()
	pending := cs.Pending
	cs.Pending = map[string]*Coll{}
	cs.Mu.Unlock()
	for _, c := range pending {
		for _, d := range c.dones {
			d(nil, err)
		}
	}
}

// PackVerts writes sorted, distinct vertices as ranges (first, last pairs):
// a job's nodes are mostly consecutive vertices.
func PackVerts(vs []int) []int {
	var out []int
	for i := 0; i < len(vs); {
		j := i
		for j+1 < len(vs) && vs[j+1] == vs[j]+1 {
			j++
		}
		out = append(out, vs[i], vs[j])
		i = j + 1
	}
	return out
}

// UnpackVerts reads packVerts' ranges; n bounds the vertices (1..n, and 0).
func UnpackVerts(rs []int, n int) ([]int, error) {
	if len(rs)%2 != 0 {
		return nil, errors.New("odd vertex ranges")
	}
	var out []int
	for i := 0; i < len(rs); i += 2 {
		a, b := rs[i], rs[i+1]
		if a < 0 || b < a || b > n || len(out)+b-a+1 > n+1 {
			return nil, fmt.Errorf("bad vertex range %d-%d", a, b)
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}

// CollUp is a subtree's combined contribution to a collective (tColl).
type CollUp struct {
	Coll  string         `json:",omitzero"` // its key (collKey)
	Kind  string         `json:",omitzero"`
	Procs []pmixsrv.Proc `json:",omitzero"`
	Verts []int          `json:",omitzero"` // the participants' vertices, as ranges (packVerts)
	// Gen is the collective's failure generation at the sender (failGen):
	// a parent drops a contribution of a generation it saw fail (stale).
	// Expired: not a contribution but a report that the collective timed
	// out at the sender waiting for participants on the vertices Missing;
	// relays pass it up, the launcher decides.
	Gen     uint64 `json:",omitzero"`
	Expired bool   `json:",omitzero"`
	Missing []int  `json:",omitzero"`
}

// CollResult is a collective's result, to a child that contributed
// (tCollDone): its data, or why it failed.
type CollResult struct {
	Coll string `json:",omitzero"`
	Status
}

// CollFail is nodes lost, or a process dead (a group member): the
// collectives they take part in fail (tCollFail).
type CollFail struct {
	Verts []int          `json:",omitzero"` // as ranges (packVerts)
	Procs []pmixsrv.Proc `json:",omitzero"` // dead processes (failsOnDeath kinds)
	// Coll: one collective that timed out (its key), failure generation Gen.
	Coll string `json:",omitzero"`
	Gen  uint64 `json:",omitzero"`
	Status
}

// CollErr is the error a collective's result carries: the PMIx status with
// the launcher's words (which name the lost node).
func (s Status) CollErr() error {
	if s.Code != 0 && s.Err != "" {
		return &StatusError{s.Err, pmixsrv.Status(s.Code)}
	}
	return s.err()
}

// StatusError is a PMIx status with the words that came with it.
type StatusError struct {
	text string
	st   pmixsrv.Status
}

// NewStatusError is an error of that text that unwraps to st.
func NewStatusError(text string, st pmixsrv.Status) *StatusError { return &StatusError{text, st} }

func (e *StatusError) Error() string { return e.text }
func (e *StatusError) Unwrap() error { return e.st }

// Collective frames carry their data as bytes, not JSON: a fence's result
// is every participant's data (an allgather), and base64 inside JSON, at
// every vertex it passes, cost most of a large fence's time. The body is
// the JSON header's length (4 bytes), the header (collUp or collResult),
// then the data.
func EncodeColl(hdr any, data []byte) []byte {
	h, _ := Encode(hdr) // headers hold strings and numbers only: they encode
	b := make([]byte, 4, 4+len(h)+len(data))
	binary.BigEndian.PutUint32(b, uint32(len(h)))
	return append(append(b, h...), data...)
}

// DecodeColl reads a collective frame's header into hdr and returns its data.
func DecodeColl(body []byte, hdr any) ([]byte, error) {
	if len(body) < 4 {
		return nil, errors.New("short collective message")
	}
	n := binary.BigEndian.Uint32(body)
	if uint64(n) > uint64(len(body)-4) {
		return nil, errors.New("bad collective message header")
	}
	if err := Decode(body[4:4+n], hdr); err != nil {
		return nil, err
	}
	return body[4+n:], nil
}
