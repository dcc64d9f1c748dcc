package daemon

import (
	"encoding/binary"
	"errors"
	"math"

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
)

// NoContextID is the context id of a group that asked for none (libpmix's
// SIZE_MAX).
const NoContextID = math.MaxUint64

// A node's contribution to a construct is one record: its length (4 bytes),
// its flags (1 byte), then libpmix's PMIX_GROUP_ENDPT_DATA. Records
// concatenate as contributions combine along the tree.
func groupRecord(flags byte, data []byte) []byte {
	b := make([]byte, 5, 5+len(data))
	binary.BigEndian.PutUint32(b, uint32(1+len(data)))
	b[4] = flags
	return append(b, data...)
}

var errGroupRecord = errors.New("bad group contribution")

// FinishGroup completes a construct at the root from every node's record:
// the result is the context id (8 bytes; NoContextID unless a member asked,
// then cid()) and the nodes' data, concatenated (libpmix reads a sequence
// of its own blobs). It returns the OR of the nodes' flags too.
func FinishGroup(all []byte, cid func() uint64) ([]byte, byte, error) {
	var flags byte
	size := 0
	for b := all; len(b) > 0; {
		if len(b) < 5 {
			return nil, 0, errGroupRecord
		}
		n := binary.BigEndian.Uint32(b)
		if n < 1 || uint64(n) > uint64(len(b)-4) {
			return nil, 0, errGroupRecord
		}
		flags |= b[4]
		size += int(n) - 1
		b = b[4+n:]
	}
	id := uint64(NoContextID)
	if flags&GroupAssignCID != 0 {
		id = cid()
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+size), id)
	for b := all; len(b) > 0; {
		n := binary.BigEndian.Uint32(b)
		out = append(out, b[5:4+n]...)
		b = b[4+n:]
	}
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
func (h host) Group(op pmixsrv.GroupOp, grp string, procs []pmixsrv.Proc, directives []pmixsrv.Info, done func([]pmixsrv.Info, error)) error {
	switch op {
	case pmixsrv.GroupDestruct:
		h.d.up.Fence(h.d.cfg.Name, GroupDestructKind+grp, procs, nil, func(_ []byte, err error) { done(nil, err) })
		return nil
	case pmixsrv.GroupConstruct:
	default:
		return pmixsrv.ErrNotSupported
	}
	var flags byte
	var data []byte
	for _, in := range directives {
		switch in.Key {
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
	h.d.up.Fence(h.d.cfg.Name, GroupConstructKind+grp, procs, groupRecord(flags, data), func(res []byte, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(groupResult(res))
	})
	return nil
}
