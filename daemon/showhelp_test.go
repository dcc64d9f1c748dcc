package daemon

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// packHelp packs a message as Open MPI 4.1's show_help does.
func packHelp(file, topic string, have bool, text string) []byte {
	var b []byte
	i32 := func(v int) { b = binary.BigEndian.AppendUint32(b, uint32(v)) }
	str := func(s string) { i32(1); i32(len(s) + 1); b = append(append(b, s...), 0) }
	str(file)
	str(topic)
	i32(1)
	if have {
		b = append(b, 1)
		str(text)
	} else {
		b = append(b, 0)
	}
	return b
}

func TestDecodeHelpOpenMPI(t *testing.T) {
	// Captured from an Open MPI 4.1.4 rank whose MPI_Init failed under prun.
	b, err := os.ReadFile("testdata/ompi-help-mpi-errors.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, text, err := decodeHelp(b)
	if err != nil || !text {
		t.Fatalf("decodeHelp: %v, text %v", err, text)
	}
	if m.File != "help-mpi-errors.txt" || m.Topic != "mpi_errors_are_fatal unknown handle" ||
		!strings.Contains(m.Text, "*** An error occurred in MPI_Init\n") {
		t.Errorf("decoded %+v", m)
	}
}

func TestDecodeHelp(t *testing.T) {
	m, text, err := decodeHelp(packHelp("help-x.txt", "topic", true, "line 1\nline 2\n"))
	if err != nil || !text || m != (helpMessage{"help-x.txt", "topic", "line 1\nline 2\n"}) {
		t.Errorf("got %+v %v %v", m, text, err)
	}
	if _, text, err := decodeHelp(packHelp("help-x.txt", "topic", false, "")); err != nil || text {
		t.Errorf("a suppression: text %v, err %v", text, err)
	}
	good := packHelp("f", "t", true, "x")
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
		"no NUL":    append(append([]byte(nil), good[:len(good)-1]...), 'y'),
		"count 2":   append([]byte{0, 0, 0, 2}, good[4:]...),
		"huge len":  append([]byte{0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}, good[8:]...),
		"neg len":   append([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe}, good[8:]...),
		"text":      []byte("plain text, not packed"),
	} {
		if _, _, err := decodeHelp(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeHelp(f *testing.F) {
	f.Add(packHelp("help-x.txt", "topic", true, "text\n"))
	f.Add(packHelp("f", "t", false, ""))
	if b, err := os.ReadFile("testdata/ompi-help-mpi-errors.bin"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, text, err := decodeHelp(b)
		if err != nil {
			return
		}
		// What decodes, packed again, decodes the same (a NULL string,
		// length 0, and an empty one, length 1, both decode to "").
		m2, text2, err := decodeHelp(packHelp(m.File, m.Topic, text, m.Text))
		if err != nil || m2 != m || text2 != text {
			t.Errorf("%q decodes to %+v (text %v), which packed decodes to %+v (text %v, %v)", b, m, text, m2, text2, err)
		}
	})
}
