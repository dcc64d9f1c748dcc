package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A batch's body: for each frame, its type (1 byte), its payload's length
// (4 bytes, big-endian), its payload (with its routing header).

// Batchable are the kinds that travel in batches: output and the messages
// that go with it, events, and the acknowledgements of what came down.
// Hellos (a link's first frame is one), collectives (counted per message),
// requests and replies go alone.
func Batchable(typ uint8) bool {
	switch typ {
	case TOutput, TSourceInfo, TEnd, TEvent, TNotify, TStdinAck, TStdinDone, TPreloadAck:
		return true
	}
	return false
}

// BatchMax bounds a batch's payload: a frame larger than this goes alone,
// and a batch ends before a frame that would take it past.
const BatchMax = 1 << 20

// EncodeBatch makes a batch's body.
func EncodeBatch(fs []Queued) []byte {
	n := 0
	for _, f := range fs {
		n += 5 + len(f.P)
	}
	b := make([]byte, 0, n)
	for _, f := range fs {
		b = append(b, f.Typ)
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.P)))
		b = append(b, f.P...)
	}
	return b
}

// DecodeBatch hands each frame of a batch to f, in order, after checking
// the whole batch: nothing of a malformed one is handled. The payloads are
// slices of b.
func DecodeBatch(b []byte, f func(typ uint8, p []byte)) (int, error) {
	return DecodeBatchOf(b, Batchable, f)
}

// DecodeBatchOf is decodeBatch for a batch of the kinds ok allows.
func DecodeBatchOf(b []byte, ok func(uint8) bool, f func(typ uint8, p []byte)) (int, error) {
	var fs []Queued
	for rest := b; len(rest) > 0; {
		if len(rest) < 5 {
			return 0, errors.New("bad batch: a frame's header is cut")
		}
		typ, n := rest[0], binary.BigEndian.Uint32(rest[1:5])
		if !ok(typ) {
			return 0, fmt.Errorf("bad batch: a frame of type %d", typ)
		}
		if uint64(n) > uint64(len(rest)-5) {
			return 0, errors.New("bad batch: a frame is cut")
		}
		fs = append(fs, Queued{typ, rest[5 : 5+n : 5+n]})
		rest = rest[5+n:]
	}
	if len(fs) == 0 {
		return 0, errors.New("bad batch: empty")
	}
	for _, q := range fs {
		f(q.Typ, q.P)
	}
	return len(fs), nil
}

// Queued is a frame waiting on an upQueue.
type Queued struct {
	Typ uint8
	P   []byte
}

// AckDownAllowed are the kinds a batch from the parent may carry.
func AckDownAllowed(typ uint8) bool { return typ == TOutputAck }

// SendDown sends frames fs, each routed through child hop, as one frame
// when they are several (batchMax bounds each).
func SendDown(send func(int, uint8, []byte) error, hop int, src uint32, fs []Queued) (frames int) {
	for ; len(fs) > 0; frames++ {
		k, size := 1, len(fs[0].P)
		for k < len(fs) && size+5+len(fs[k].P) <= BatchMax {
			size += 5 + len(fs[k].P)
			k++
		}
		if k == 1 {
			dest, _, _, _ := Header(fs[0].P)
			send(int(dest), fs[0].Typ, fs[0].P)
		} else {
			send(hop, TBatch, Frame(uint32(hop), src, EncodeBatch(fs[:k])))
		}
		fs = fs[k:]
	}
	return frames
}
