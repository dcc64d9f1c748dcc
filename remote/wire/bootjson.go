package wire

import (
	"encoding/json"

	"prun/internal/jsonbytes"
)

// The bootstrap's strings that are the user's bytes (the forwarded
// environment, paths, the --rsh command) travel as jsonbytes: JSON strings
// are UTF-8, and encoding/json would write any other byte as U+FFFD. The
// wire form embeds the plain one and shadows those fields.

type bootAlias Bootstrap

type wireBoot struct {
	bootAlias
	Exe, Home, Rsh jsonbytes.String
	Env            jsonbytes.Strings
}

// MarshalJSON writes b with its strings byte for byte.
func (b Bootstrap) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireBoot{bootAlias: bootAlias(b), Exe: jsonbytes.String(b.Exe), Home: jsonbytes.String(b.Home),
		Rsh: jsonbytes.String(b.Rsh), Env: b.Env})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (b *Bootstrap) UnmarshalJSON(p []byte) error {
	var w wireBoot
	if err := json.Unmarshal(p, &w); err != nil {
		return err
	}
	*b = Bootstrap(w.bootAlias)
	b.Exe, b.Home, b.Rsh, b.Env = string(w.Exe), string(w.Home), string(w.Rsh), w.Env
	return nil
}
