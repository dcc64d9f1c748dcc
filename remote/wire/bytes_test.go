package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"prun/daemon"
	"prun/names"
	"prun/pmixsrv"
)

// allBytes is every byte value from 1 to 255.
func allBytes() string {
	var b strings.Builder
	for i := 1; i < 256; i++ {
		b.WriteByte(byte(i))
	}
	return b.String()
}

// The user's bytes cross the control plane unchanged: spawn requests,
// names, PMIx string values, and the bootstrap.
func TestMessagesBytes(t *testing.T) {
	x := "x\xffy" + allBytes()
	for _, in := range []any{
		&SpawnReq{Request: Request{ID: 1}, Preput: [][2]string{{"k\xff", x}},
			Apps: []daemon.SpawnApp{{Cmd: "/c\xff", Argv: []string{"c", x}, Env: []string{"V=" + x}, Cwd: "/\xe9", NP: 2}}},
		&UnpublishReq{Request: Request{ID: 2}, Publisher: "a:\xfe", Keys: []string{x, "plain"}},
		&LookupReq{Request: Request{ID: 3}, Keys: []string{x}},
		&PublishReq{Entries: []names.Entry{{Key: x, Value: x, Publisher: "p\xff"}}},
		&Notify{Info: []pmixsrv.Info{{Key: "k\xff", Value: x}, {Key: "n", Value: uint32(5)}}},
		&daemon.Event{Kind: daemon.ProcAborted, Rank: 1, Msg: "abort " + x},
	} {
		b, err := Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		out := reflect.New(reflect.TypeOf(in).Elem()).Interface()
		if err := Decode(b, out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("message came back as\n%+v\nwant\n%+v", out, in)
		}
	}
	table := []pmixsrv.ProcInfo{{Proc: pmixsrv.Proc{Nspace: "n", Rank: 1}, Host: "h", Exe: "/\xff", Pid: 3}}
	_, rb, _ := ReplyID(EncodeReply(1, table, nil))
	if back, err := DecodeReply[[]pmixsrv.ProcInfo](rb); err != nil || !reflect.DeepEqual(back, table) {
		t.Errorf("proc table came back as %+v, %v", back, err)
	}

	b := Bootstrap{Secret: []byte{1, 2}, Vertex: 2, Hosts: []string{"a", "b"}, Logins: []Login{{}, {User: "u", Port: 2222}},
		Fanout: 2, ParentPort: 9, Exe: "/opt/\xff/prun", Home: "/h\xfe", Rsh: "ssh -o X=\xff", Env: []string{"OMPI_MCA_x=" + x}}
	line, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Bootstrap
	if err := json.Unmarshal(line, &back); err != nil || !reflect.DeepEqual(b, back) {
		t.Errorf("bootstrap came back as %+v, %v; want %+v (via %s)", back, err, b, line)
	}
}
