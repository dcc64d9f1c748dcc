package daemon

import (
	"encoding/binary"
	"errors"
)

// Open MPI 4.x ranks under a PMIx server that is not its own ORTE send
// their help messages ("At least one pair of MPI processes are unable to
// reach each other...") with PMIx_Log as one byte object under
// pmix.log.msg, packed the way Open MPI packs its own buffers (opal_dss,
// non-described): per item an int32 count, then strings as an int32 length
// (with the NUL) and the bytes, an int8 as one byte. The items are the help
// file, the topic, whether text follows, and the rendered text. Without
// this, prun would drop every such message and a failed MPI_Init would say
// no more than "called abort".

// helpMessage is one decoded message.
type helpMessage struct {
	File, Topic, Text string
}

var errHelpFormat = errors.New("not an Open MPI help message")

// decodeHelp decodes an Open MPI help message; ok is false for one that
// carries no text (a request to suppress a topic).
func decodeHelp(b []byte) (m helpMessage, ok bool, err error) {
	r := helpReader{b: b}
	m.File = r.str()
	m.Topic = r.str()
	have := r.int8()
	if have != 0 {
		m.Text = r.str()
	}
	if r.err != nil || len(r.b) != 0 {
		return helpMessage{}, false, errHelpFormat
	}
	return m, have != 0, nil
}

type helpReader struct {
	b   []byte
	err error
}

func (r *helpReader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errHelpFormat
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *helpReader) int32() int {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(p)))
}

// one reads an item's count, which is always 1 here.
func (r *helpReader) one() {
	if r.int32() != 1 {
		r.err = errHelpFormat
	}
}

func (r *helpReader) str() string {
	r.one()
	n := r.int32()
	if n == 0 || r.err != nil {
		return ""
	}
	p := r.take(n)
	if p == nil || p[n-1] != 0 {
		r.err = errHelpFormat
		return ""
	}
	return string(p[:n-1])
}

func (r *helpReader) int8() int8 {
	r.one()
	p := r.take(1)
	if p == nil {
		return 0
	}
	return int8(p[0])
}
