package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"prun/pmixsrv"
)

// PMIx groups are collectives like fences: a construct exchanges the
// members' data (what libpmix collected from this node's members, opaque
// here) and the directives that need the root (a context id); a destruct
// is a barrier. Their kinds carry the group's name, so two groups of the
// same members are two collectives.
const (
	GroupConstructKind = "group-construct:"
	GroupDestructKind  = "group-destruct:"
)

// Group flags, OR-ed over the members' nodes at the root.
const (
	GroupAssignCID byte = 1 << iota // PMIX_GROUP_ASSIGN_CONTEXT_ID
	GroupNotify                     // PMIX_GROUP_NOTIFY_TERMINATION
	GroupTimeout                    // PMIX_TIMEOUT: 4 bytes of milliseconds follow the flags
)

// NoContextID is the context id of a group that asked for none (libpmix's
// SIZE_MAX).
const NoContextID = math.MaxUint64

// A node's contribution to a construct is one record: its length (4 bytes),
// its flags (1 byte), with GroupTimeout the timeout (4 bytes, ms), then
// libpmix's PMIX_GROUP_ENDPT_DATA. Records concatenate as contributions
// combine along the tree.
func groupRecord(flags byte, timeout time.Duration, data []byte) []byte {
	b := make([]byte, 5, 9+len(data))
	b[4] = flags
	if timeout > 0 {
		b[4] |= GroupTimeout
		b = binary.BigEndian.AppendUint32(b, uint32(min(timeout.Milliseconds(), math.MaxUint32)))
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4+len(data)))
	return append(b, data...)
}

// groupRecords calls f with each record's flags, timeout and data.
func groupRecords(all []byte, f func(flags byte, timeout time.Duration, data []byte)) error {
	for b := all; len(b) > 0; {
		if len(b) < 5 {
			return errGroupRecord
		}
		n := binary.BigEndian.Uint32(b)
		if n < 1 || uint64(n) > uint64(len(b)-4) {
			return errGroupRecord
		}
		rec, flags := b[5:4+n], b[4]
		var d time.Duration
		if flags&GroupTimeout != 0 {
			if len(rec) < 4 {
				return errGroupRecord
			}
			d = time.Duration(binary.BigEndian.Uint32(rec)) * time.Millisecond
			rec = rec[4:]
		}
		f(flags, d, rec)
		b = b[4+n:]
	}
	return nil
}

// GroupTimeoutOf is the shortest PMIX_TIMEOUT among a construct's records
// (0: none): the launcher fails the construct when it passes.
func GroupTimeoutOf(all []byte) time.Duration {
	var out time.Duration
	groupRecords(all, func(_ byte, d time.Duration, _ []byte) {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	})
	return out
}

var errGroupRecord = errors.New("bad group contribution")

// FinishGroup completes a construct at the root from every node's record:
// the result is the context id (8 bytes; NoContextID unless a member asked,
// then cid()) and the nodes' data, concatenated (libpmix reads a sequence
// of its own blobs). It returns the OR of the nodes' flags too.
func FinishGroup(all []byte, cid func() uint64) ([]byte, byte, error) {
	var flags byte
	size := 0
	if err := groupRecords(all, func(f byte, _ time.Duration, data []byte) {
		flags |= f
		size += len(data)
	}); err != nil {
		return nil, 0, err
	}
	id := uint64(NoContextID)
	if flags&GroupAssignCID != 0 {
		id = cid()
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+size), id)
	groupRecords(all, func(_ byte, _ time.Duration, data []byte) { out = append(out, data...) })
	return out, flags, nil
}

// groupResult reads FinishGroup's result as what libpmix hands the local
// members.
func groupResult(res []byte) ([]pmixsrv.Info, error) {
	if len(res) < 8 {
		return nil, errGroupRecord
	}
	var out []pmixsrv.Info
	if id := binary.BigEndian.Uint64(res); id != NoContextID {
		out = append(out, pmixsrv.Info{Key: pmixsrv.KeyGroupContextID, Value: pmixsrv.Size(id)})
	}
	if len(res) > 8 {
		out = append(out, pmixsrv.Info{Key: pmixsrv.KeyGroupEndptData, Value: res[8:]})
	}
	return out, nil
}

// Group is the group upcall: construct and destruct, through the same
// collectives as fences. Invite, join and leave (asynchronous groups) are
// client calls that libpmix 4.2.2 turns into events and constructs among
// the processes; they reach no other upcall.
func (h host) Group(op pmixsrv.GroupOp, grp string, procs []pmixsrv.Proc, local int, directives []pmixsrv.Info, done func([]pmixsrv.Info, error)) error {
	// libpmix 4.2.2 hands an operation on once every local member it still
	// counts called: a member whose connection it lost first (it ended,
	// maybe not yet reaped here) is left out, and the operation would
	// complete without it. It fails here; the launcher fails it for the
	// other nodes' members once it hears of the end.
	if mine := h.d.localMembers(procs); local < mine {
		err := h.d.endedMember(grp, procs)
		if err == nil {
			err = fmt.Errorf("group %s: %d of its %d members on %s ended without taking part: %w",
				grp, mine-local, mine, h.d.cfg.Name, pmixsrv.GroupConstructAbort)
		}
		done(nil, err)
		return nil
	}
	if op != pmixsrv.GroupDestruct && op != pmixsrv.GroupConstruct {
		return pmixsrv.ErrNotSupported
	}
	var flags byte
	var data []byte
	var timeout time.Duration
	for _, in := range directives {
		switch in.Key {
		case pmixsrv.KeyTimeout:
			// Seconds, of whatever integer type the caller chose.
			if s, ok := intValue(in.Value); ok && s > 0 {
				timeout = time.Duration(s) * time.Second
			}
		case pmixsrv.KeyGroupAssignContextID:
			if b, ok := in.Value.(bool); ok && b {
				flags |= GroupAssignCID
			}
		case pmixsrv.KeyGroupNotifyTerm:
			if b, ok := in.Value.(bool); ok && b {
				flags |= GroupNotify
			}
		case pmixsrv.KeyGroupEndptData:
			data, _ = in.Value.([]byte)
		}
	}
	if op == pmixsrv.GroupDestruct {
		// A barrier; with PMIX_TIMEOUT its contribution carries the
		// timeout, which the vertices enforce as a construct's.
		var rec []byte
		if timeout > 0 {
			rec = groupRecord(0, timeout, nil)
		}
		h.d.up.Fence(h.d.cfg.Name, GroupDestructKind+grp, procs, rec, func(_ []byte, err error) { done(nil, err) })
		return nil
	}
	h.d.up.Fence(h.d.cfg.Name, GroupConstructKind+grp, procs, groupRecord(flags, timeout, data), func(res []byte, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(groupResult(res))
	})
	return nil
}

// endedMember names a member of a group operation among procs that runs on
// this node and has ended, as a PMIX_GROUP_CONSTRUCT_ABORT error.
func (d *Daemon) endedMember(grp string, procs []pmixsrv.Proc) error {
	for _, ns := range uniqueNspaces(procs) {
		sh := d.shell(ns)
		if sh == nil {
			continue
		}
		if r, ok := sh.endedAmong(procs); ok {
			return fmt.Errorf("group %s: rank %d of %s on %s ended: %w", grp, r, ns, d.cfg.Name, pmixsrv.GroupConstructAbort)
		}
	}
	return nil
}

// localMembers counts the ranks of this node among procs.
func (d *Daemon) localMembers(procs []pmixsrv.Proc) int {
	n := 0
	for _, ns := range uniqueNspaces(procs) {
		if sh := d.shell(ns); sh != nil {
			n += sh.membersAmong(procs)
		}
	}
	return n
}

func uniqueNspaces(procs []pmixsrv.Proc) []string {
	var out []string
	for _, p := range procs {
		if !slices.Contains(out, p.Nspace) {
			out = append(out, p.Nspace)
		}
	}
	return out
}

// intValue reads an integer PMIx value of any width.
func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(min(x, math.MaxInt64)), true
	case pmixsrv.Size:
		return int64(min(uint64(x), math.MaxInt64)), true
	}
	return 0, false
}
