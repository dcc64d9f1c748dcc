// Package pmi serves MPICH's PMI-1 and PMI-2 wire protocols (the simple text
// protocols Hydra speaks on PMI_FD) for one rank's connection. It parses and
// answers; what a command means for the job (KVS, barriers, names, spawn) is
// the Job's business, which the node daemon implements.
package pmi

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Limits a client learns from get_maxes; anything larger is a protocol error.
const (
	KvsnameMax = 256
	KeylenMax  = 64
	VallenMax  = 1024
	maxLine    = 64 << 10 // one PMI-1 line or PMI-2 command
	maxMulti   = 1 << 20  // a PMI-1 multi-line spawn command
)

// Command is one parsed request: its name and its key=value fields, in order.
type Command struct {
	Name   string
	Fields []Field
}

// Field is one key=value pair.
type Field struct{ Key, Value string }

// Get returns the value of the first field named key.
func (c *Command) Get(key string) (string, bool) {
	for _, f := range c.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Int returns a field as a non-negative int.
func (c *Command) Int(key string) (int, error) {
	v, ok := c.Get(key)
	if !ok {
		return 0, fmt.Errorf("%s: missing %s", c.Name, key)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %s=%q is not a count", c.Name, key, v)
	}
	return n, nil
}

var errEmpty = errors.New("empty command")

// ParseV1 parses one PMI-1 line ("cmd=put kvsname=k key=a value=b", without
// the newline). Values cannot contain spaces in PMI-1; the first field names
// the command (cmd= or mcmd=).
func ParseV1(line string) (*Command, error) {
	if len(line) > maxLine {
		return nil, fmt.Errorf("command of %d bytes exceeds %d", len(line), maxLine)
	}
	return command(strings.Fields(line), "cmd", "mcmd")
}

// command turns "key=value" parts into a Command; the first part names it
// with one of the given keys.
func command(parts []string, nameKeys ...string) (*Command, error) {
	if len(parts) == 0 {
		return nil, errEmpty
	}
	c := &Command{}
	for i, w := range parts {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("malformed field %q", clip(w))
		}
		if i == 0 {
			if !slices.Contains(nameKeys, k) {
				return nil, fmt.Errorf("command must start with %s=, got %q", nameKeys[0], clip(w))
			}
			c.Name = v
			continue
		}
		c.Fields = append(c.Fields, Field{k, v})
	}
	if c.Name == "" {
		return nil, errEmpty
	}
	return c, nil
}

// ParseV1Multi parses the body of a PMI-1 "mcmd=spawn" command: one
// key=value per line, up to and excluding "endcmd".
func ParseV1Multi(lines []string) (*Command, error) {
	return command(lines, "mcmd")
}

// FormatV1 renders a PMI-1 reply line, newline included. PMI-1 cannot carry
// spaces or newlines inside values; they are replaced so that a reply stays
// one well-formed line.
func FormatV1(name string, fields ...Field) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(name)
	for _, f := range fields {
		b.WriteByte(' ')
		b.WriteString(f.Key)
		b.WriteByte('=')
		b.WriteString(strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\r' {
				return '_'
			}
			return r
		}, f.Value))
	}
	b.WriteByte('\n')
	return b.String()
}

// ParseV2 parses one PMI-2 command body (after its 6-byte length header):
// "cmd=kvs-put;key=a;value=b;" where ";;" stands for a literal ';'.
func ParseV2(body string) (*Command, error) {
	if len(body) > maxLine {
		return nil, fmt.Errorf("command of %d bytes exceeds %d", len(body), maxLine)
	}
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(body); i++ {
		if body[i] == ';' {
			if i+1 < len(body) && body[i+1] == ';' {
				cur.WriteByte(';')
				i++
				continue
			}
			fields = append(fields, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(body[i])
	}
	if cur.Len() > 0 {
		fields = append(fields, cur.String())
	}
	return command(fields, "cmd")
}

// FormatV2 renders a PMI-2 reply with its 6-byte length header.
func FormatV2(name string, fields ...Field) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(escapeV2(name))
	b.WriteByte(';')
	for _, f := range fields {
		b.WriteString(escapeV2(f.Key))
		b.WriteByte('=')
		b.WriteString(escapeV2(f.Value))
		b.WriteByte(';')
	}
	return fmt.Sprintf("%-6d%s", b.Len(), b.String())
}

func escapeV2(s string) string { return strings.ReplaceAll(s, ";", ";;") }

// clip shortens client text quoted in messages.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// sortedKeys is for deterministic getbyidx order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
