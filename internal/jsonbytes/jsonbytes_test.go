package jsonbytes

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// every is a string of every byte value.
func every() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}

type sample struct {
	S  String
	L  Strings
	P  Pairs
	PS *String `json:",omitempty"`
}

func roundTrip(t *testing.T, in sample) []byte {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out sample
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("%+v came back as %+v (via %s)", in, out, b)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	bad := String("a\xff\xfeb")
	for _, s := range []string{"", "plain", "é ü €", "\ufffd", "a\xff\xfeb", "x\xffy", every(), "\xed\xa0\x80", `{"b64":"AA=="}`, "\x00"} {
		roundTrip(t, sample{S: String(s), L: Strings{s, "ok", s}, P: Pairs{{"K", s}, {s, "v"}}, PS: &bad})
	}
	roundTrip(t, sample{})
	// Valid UTF-8 stays a plain JSON string, so that messages stay
	// readable; other bytes only take the tagged form.
	b := roundTrip(t, sample{S: "héllo", L: Strings{"a", "b"}, P: Pairs{{"k", "v"}}})
	if want := `{"S":"héllo","L":["a","b"],"P":[["k","v"]]}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	b = roundTrip(t, sample{S: "a\xffb", L: Strings{"a", "\xfe"}})
	if want := `{"S":{"b64":"Yf9i"},"L":["a",{"b64":"/g=="}],"P":null}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	// Plain strings written by anything else read as themselves.
	var s String
	if err := json.Unmarshal([]byte(`"x\u00ffy"`), &s); err != nil || s != "x\u00ffy" {
		t.Errorf("plain string: %q, %v", s, err)
	}
	for _, junk := range []string{`3`, `{"b64":"!!"}`, `[`, `true`} {
		if err := json.Unmarshal([]byte(junk), &s); err == nil {
			t.Errorf("%s: no error", junk)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "a\xff\xfeb", every(), "\ufffd\xff", `{"b64":""}`} {
		f.Add(s, "v")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		roundTrip(t, sample{S: String(a), L: Strings{a, b}, P: Pairs{{a, b}}})
	})
}

// Anything that decodes does so without a panic, and what it decodes to
// encodes and decodes back to itself.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`"x"`, `{"b64":"Yf9i"}`, `null`, `["a",{"b64":"/g=="}]`, `[["k",{"b64":"/w=="}]]`, `{"b64":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var s String
		if json.Unmarshal([]byte(in), &s) == nil {
			roundTrip(t, sample{S: s})
		}
		var l Strings
		if json.Unmarshal([]byte(in), &l) == nil {
			roundTrip(t, sample{L: l})
		}
		var p Pairs
		if json.Unmarshal([]byte(in), &p) == nil && strings.HasPrefix(strings.TrimSpace(in), "[") {
			roundTrip(t, sample{P: p})
		}
	})
}
