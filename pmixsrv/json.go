package pmixsrv

import (
	"encoding/json"
	"fmt"
)

// Info values cross the control plane between nodes as JSON, which keeps
// numbers, not their PMIx types: a value travels with a tag naming its Go
// type, {"T":"rank","V":3}, and comes back as the same type.

// typedValue is a value's JSON form.
type typedValue struct {
	T string          `json:",omitempty"` // "" for nil
	V json.RawMessage `json:",omitempty"`
}

// tagOf names v's type; "" for nil.
func tagOf(v any) (string, error) {
	switch v.(type) {
	case nil:
		return "", nil
	case string:
		return "string", nil
	case NodeMap:
		return "nodemap", nil
	case ProcMap:
		return "procmap", nil
	case bool:
		return "bool", nil
	case uint8:
		return "uint8", nil
	case uint16:
		return "uint16", nil
	case uint32:
		return "uint32", nil
	case uint64:
		return "uint64", nil
	case Rank:
		return "rank", nil
	case Size:
		return "size", nil
	case int:
		return "int", nil
	case int32:
		return "int32", nil
	case int64:
		return "int64", nil
	case Pid:
		return "pid", nil
	case Status:
		return "status", nil
	case DataRange:
		return "range", nil
	case Persistence:
		return "persist", nil
	case float64:
		return "float64", nil
	case []byte:
		return "bytes", nil
	case Proc:
		return "proc", nil
	case []Proc:
		return "procs", nil
	case []Info:
		return "infos", nil
	case []ProcInfo:
		return "procinfos", nil
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
	switch tv.T {
	case "":
		return nil, nil
	case "string":
		return decodeAs[string](tv.V)
	case "nodemap":
		return decodeAs[NodeMap](tv.V)
	case "procmap":
		return decodeAs[ProcMap](tv.V)
	case "bool":
		return decodeAs[bool](tv.V)
	case "uint8":
		return decodeAs[uint8](tv.V)
	case "uint16":
		return decodeAs[uint16](tv.V)
	case "uint32":
		return decodeAs[uint32](tv.V)
	case "uint64":
		return decodeAs[uint64](tv.V)
	case "rank":
		return decodeAs[Rank](tv.V)
	case "size":
		return decodeAs[Size](tv.V)
	case "int":
		return decodeAs[int](tv.V)
	case "int32":
		return decodeAs[int32](tv.V)
	case "int64":
		return decodeAs[int64](tv.V)
	case "pid":
		return decodeAs[Pid](tv.V)
	case "status":
		return decodeAs[Status](tv.V)
	case "range":
		return decodeAs[DataRange](tv.V)
	case "persist":
		return decodeAs[Persistence](tv.V)
	case "float64":
		return decodeAs[float64](tv.V)
	case "bytes":
		return decodeAs[[]byte](tv.V)
	case "proc":
		return decodeAs[Proc](tv.V)
	case "procs":
		return decodeAs[[]Proc](tv.V)
	case "infos":
		return decodeAs[[]Info](tv.V)
	case "procinfos":
		return decodeAs[[]ProcInfo](tv.V)
	}
	return nil, fmt.Errorf("pmixsrv: unknown value type %q", tv.T)
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
	K string
	V json.RawMessage
}

// MarshalJSON writes the key and the value with its type.
func (in Info) MarshalJSON() ([]byte, error) {
	v, err := MarshalValue(in.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Key, err)
	}
	return json.Marshal(info{K: in.Key, V: v})
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
	in.Key, in.Value = w.K, v
	return nil
}
