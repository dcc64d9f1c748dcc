// Package jsonbytes carries strings through JSON byte for byte.
//
// JSON strings are UTF-8: encoding/json writes each byte of a Go string
// that is not valid UTF-8 as U+FFFD, so an argument, an environment value
// or a path holding such bytes (Latin-1 file names, binary values) arrives
// changed on another node. A String marshals as a plain JSON string when it
// is valid UTF-8, the common case, which stays readable and costs a check
// more than a string; otherwise as {"b64":"..."}, its bytes in standard
// base64. Unmarshal takes either form. Strings and Pairs are the same for
// lists and key-value pairs; a conversion from []string or [][2]string
// copies nothing.
package jsonbytes

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// String is a string that JSON carries byte for byte.
type String string

// Strings is a list of them.
type Strings []string

// Pairs is a list of string pairs (key, value).
type Pairs [][2]string

// tagged is the form of a string that is not valid UTF-8.
type tagged struct {
	B64 []byte `json:"b64"` // encoding/json writes []byte as standard base64
}

// MarshalJSON writes s as a JSON string, or tagged when it is not UTF-8.
func (s String) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(s)) {
		return json.Marshal(string(s))
	}
	return json.Marshal(tagged{B64: []byte(s)})
}

// UnmarshalJSON reads either form; null leaves s as it is.
func (s *String) UnmarshalJSON(b []byte) error {
	switch first(b) {
	case 'n':
		return nil
	case '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = String(v)
		return nil
	case '{':
		var t tagged
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		*s = String(t.B64)
		return nil
	}
	return errors.New("jsonbytes: want a string or {\"b64\":...}")
}

// first is the first byte of b that is not JSON white space.
func first(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return c
		}
	}
	return 0
}

// valid says whether every string of ss is UTF-8.
func valid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// MarshalJSON writes the list; only its strings that are not UTF-8 take
// the tagged form.
func (ss Strings) MarshalJSON() ([]byte, error) {
	if ss == nil {
		return []byte("null"), nil
	}
	if valid(ss...) {
		return json.Marshal([]string(ss))
	}
	w := make([]String, len(ss))
	for i, s := range ss {
		w[i] = String(s)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a list of either form.
func (ss *Strings) UnmarshalJSON(b []byte) error {
	if first(b) == 'n' {
		return nil
	}
	var w []String
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := make([]string, len(w))
	for i, s := range w {
		out[i] = string(s)
	}
	*ss = out
	return nil
}

// MarshalJSON writes the pairs as two-element lists.
func (ps Pairs) MarshalJSON() ([]byte, error) {
	if ps == nil {
		return []byte("null"), nil
	}
	ok := true
	for _, p := range ps {
		ok = ok && valid(p[0], p[1])
	}
	if ok {
		return json.Marshal([][2]string(ps))
	}
	w := make([][2]String, len(ps))
	for i, p := range ps {
		w[i] = [2]String{String(p[0]), String(p[1])}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads pairs of either form.
func (ps *Pairs) UnmarshalJSON(b []byte) error {
	if first(b) == 'n' {
		return nil
	}
	var w [][2]String
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := make([][2]string, len(w))
	for i, p := range w {
		out[i] = [2]string{string(p[0]), string(p[1])}
	}
	*ps = out
	return nil
}
