package pmixsrv

import (
	"encoding/json"
	"fmt"
	"reflect"

	"prun/internal/jsonbytes"
)

// Info values cross the control plane between nodes as JSON, which keeps
// numbers, not their PMIx types: a value travels with a tag naming its Go
// type, {"T":"rank","V":3}, and comes back as the same type.

// typedValue is a value's JSON form.
type typedValue struct {
	T string          `json:",omitempty"` // "" for nil
	V json.RawMessage `json:",omitempty"`
}

// valueTypes lists every type a value may have, with its tag: one list
// for both directions.
var valueTypes = []struct {
	tag    string
	zero   any
	decode func(json.RawMessage) (any, error)
}{
	{"string", "", decodeString}, // byte for byte: jsonbytes
	{"nodemap", NodeMap(""), decodeAs[NodeMap]},
	{"procmap", ProcMap(""), decodeAs[ProcMap]},
	{"bool", false, decodeAs[bool]},
	{"uint8", uint8(0), decodeAs[uint8]},
	{"uint16", uint16(0), decodeAs[uint16]},
	{"uint32", uint32(0), decodeAs[uint32]},
	{"uint64", uint64(0), decodeAs[uint64]},
	{"rank", Rank(0), decodeAs[Rank]},
	{"size", Size(0), decodeAs[Size]},
	{"int", 0, decodeAs[int]},
	{"int32", int32(0), decodeAs[int32]},
	{"int64", int64(0), decodeAs[int64]},
	{"pid", Pid(0), decodeAs[Pid]},
	{"status", Status(0), decodeAs[Status]},
	{"range", DataRange(0), decodeAs[DataRange]},
	{"persist", Persistence(0), decodeAs[Persistence]},
	{"float64", 0.0, decodeAs[float64]},
	{"bytes", []byte(nil), decodeAs[[]byte]},
	{"proc", Proc{}, decodeAs[Proc]},
	{"procs", []Proc(nil), decodeAs[[]Proc]},
	{"infos", []Info(nil), decodeAs[[]Info]},
	{"procinfos", []ProcInfo(nil), decodeAs[[]ProcInfo]},
}

// tagByType and decodeByTag index valueTypes, once: every value of every
// control-plane message goes through them.
var (
	tagByType   = map[reflect.Type]string{}
	decodeByTag = map[string]func(json.RawMessage) (any, error){}
)

func init() {
	for _, vt := range valueTypes {
		tagByType[reflect.TypeOf(vt.zero)] = vt.tag
		decodeByTag[vt.tag] = vt.decode
	}
}

// tagOf names v's type; "" for nil.
func tagOf(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	if tag, ok := tagByType[reflect.TypeOf(v)]; ok {
		return tag, nil
	}
	return "", fmt.Errorf("pmixsrv: value of type %T cannot travel", v)
}

// MarshalValue is v's JSON form with its type.
func MarshalValue(v any) (json.RawMessage, error) {
	t, err := tagOf(v)
	if err != nil {
		return nil, err
	}
	tv := typedValue{T: t}
	if s, ok := v.(string); ok {
		v = jsonbytes.String(s) // a C string need not be UTF-8
	}
	if v != nil {
		if tv.V, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return json.Marshal(tv)
}

// UnmarshalValue reads what MarshalValue wrote.
func UnmarshalValue(b []byte) (any, error) {
	var tv typedValue
	if err := json.Unmarshal(b, &tv); err != nil {
		return nil, err
	}
	if tv.T == "" {
		return nil, nil
	}
	if decode, ok := decodeByTag[tv.T]; ok {
		return decode(tv.V)
	}
	return nil, fmt.Errorf("pmixsrv: unknown value type %q", tv.T)
}

func decodeString(b json.RawMessage) (any, error) {
	var s jsonbytes.String
	if len(b) > 0 {
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
	}
	return string(s), nil
}

func decodeAs[T any](b json.RawMessage) (any, error) {
	var v T
	if len(b) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// info is an Info's JSON form.
type info struct {
	K jsonbytes.String
	V json.RawMessage
}

// MarshalJSON writes the key and the value with its type.
func (in Info) MarshalJSON() ([]byte, error) {
	v, err := MarshalValue(in.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Key, err)
	}
	return json.Marshal(info{K: jsonbytes.String(in.Key), V: v})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (in *Info) UnmarshalJSON(b []byte) error {
	var w info
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := UnmarshalValue(w.V)
	if err != nil {
		return fmt.Errorf("%s: %w", w.K, err)
	}
	in.Key, in.Value = string(w.K), v
	return nil
}

type procInfoAlias ProcInfo

// wireProcInfo carries Exe, a path, byte for byte.
type wireProcInfo struct {
	procInfoAlias
	Exe jsonbytes.String
}

// MarshalJSON writes the entry with its path byte for byte.
func (p ProcInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireProcInfo{procInfoAlias: procInfoAlias(p), Exe: jsonbytes.String(p.Exe)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *ProcInfo) UnmarshalJSON(b []byte) error {
	var w wireProcInfo
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = ProcInfo(w.procInfoAlias)
	p.Exe = string(w.Exe)
	return nil
}
