package iof

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fatih/color"
)

// tagSet is a source's prefixes, built once (and again by SetSourceInfo).
type tagSet struct {
	tag  [2][2][]byte // [stream][coloured] the tag before each line
	json [2][]byte    // `","rank":…,"text":"`: a JSON object after its time
	xml  [2][2][]byte // [stream] `<stdout rank="N">` and `</stdout>` + newline
}

var tagColors = []color.Attribute{color.FgCyan, color.FgGreen, color.FgYellow, color.FgMagenta, color.FgBlue,
	color.FgHiCyan, color.FgHiGreen, color.FgHiYellow, color.FgHiMagenta, color.FgHiBlue}

func (w *Writer) buildTags(src Source, host string, pid int) *tagSet {
	t := &tagSet{}
	app := strconv.Itoa(src.App)
	if src.Job > 0 { // a spawned job's ranks: [job.app,rank]
		app = strconv.Itoa(src.Job) + "." + app
	}
	rank := strconv.Itoa(src.Rank)
	for _, st := range []Stream{Stdout, Stderr} {
		var tag string
		switch {
		case w.opts.Prefix != "":
			tag = w.expandPattern(w.opts.Prefix, src, host)
		case w.opts.TagDetailed:
			h, p := host, "?"
			if h == "" {
				h = "?"
			}
			if pid > 0 {
				p = strconv.Itoa(pid)
			}
			tag = "[" + app + "," + rank + "," + h + "," + p + "]<" + st.String() + ">:"
		case w.opts.Tag:
			tag = "[" + app + "," + rank + "]<" + st.String() + ">:"
		case w.opts.Rank:
			if src.Job > 0 {
				tag = "[" + strconv.Itoa(src.Job) + "." + rank + "] "
			} else {
				tag = "[" + rank + "] "
			}
		}
		t.tag[st][0] = []byte(tag)
		if tag != "" {
			c := color.New(tagColors[src.Rank%len(tagColors)])
			if st == Stderr {
				c = color.New(color.FgRed)
			}
			c.EnableColor()
			t.tag[st][1] = []byte(c.Sprint(tag))
		}
		j := []byte(`","rank":`)
		j = strconv.AppendInt(j, int64(src.Rank), 10)
		j = append(j, `,"app":`...)
		j = strconv.AppendInt(j, int64(src.App), 10)
		j = append(j, `,"job":`...)
		j = strconv.AppendInt(j, int64(src.Job), 10)
		j = append(j, `,"host":"`...)
		j = appendJSONString(j, []byte(host))
		j = append(j, `","stream":"`...)
		j = append(j, st.String()...)
		j = append(j, `","text":"`...)
		t.json[st] = j
		x := "<" + st.String() + ` rank="` + rank + `">`
		if src.Job > 0 { // a spawned job's (mpirun says nothing of them)
			x = "<" + st.String() + ` rank="` + rank + `" job="` + strconv.Itoa(src.Job) + `">`
		}
		t.xml[st] = [2][]byte{[]byte(x), []byte("</" + st.String() + ">\n")}
	}
	return t
}

// CheckPattern checks a Hydra pattern: -prepend-pattern (Options.Prefix),
// -outfile-pattern, -errfile-pattern.
func CheckPattern(p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		if i++; i == len(p) {
			return errors.New("a lone % at the end (%% prints a %)")
		}
		if !strings.ContainsRune("rghp%", rune(p[i])) {
			return fmt.Errorf("unknown specifier %%%c (want %%r rank, %%g job, %%h host, %%p node index or %%%%)", p[i])
		}
	}
	return nil
}

// expandPattern expands a Hydra pattern (CheckPattern's specifiers) for
// src on host ("?" for what is not known yet: the host until SetSourceInfo).
func (w *Writer) expandPattern(p string, src Source, host string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		i++
		switch p[i] {
		case 'r':
			b.WriteString(strconv.Itoa(src.Rank))
		case 'g':
			b.WriteString(strconv.Itoa(src.Job))
		case 'h':
			b.WriteString(cmp.Or(host, "?"))
		case 'p':
			if n, ok := w.nodeIndex(host); ok {
				b.WriteString(strconv.Itoa(n))
			} else {
				b.WriteByte('?')
			}
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

func (w *Writer) nodeIndex(host string) (int, bool) {
	if host == "" || w.opts.NodeIndex == nil {
		return 0, false
	}
	return w.opts.NodeIndex(host)
}

// render appends p, a run of stream st, to out in form f. atStart says p
// begins a line; ts is the run's timestamp (nil without timestamps).
func render(out []byte, f form, t *tagSet, st Stream, p []byte, partial, atStart bool, ts []byte) []byte {
	switch f {
	case formJSON:
		return appendJSONLines(out, ts, t.json[st], p, partial)
	case formXML:
		return appendXMLLines(out, t.xml[st][0], t.xml[st][1], p)
	case formPrefix, formColor:
		var preBuf [96]byte
		pre := preBuf[:0]
		if ts != nil {
			pre = append(append(pre, ts...), ' ')
		}
		if f == formColor {
			pre = append(pre, t.tag[st][1]...)
		} else {
			pre = append(pre, t.tag[st][0]...)
		}
		return appendPrefixed(out, pre, p, atStart)
	}
	return append(out, p...)
}

// appendPrefixed appends p to out with pre before every line start.
func appendPrefixed(out, pre, p []byte, atStart bool) []byte {
	if len(pre) == 0 {
		return append(out, p...)
	}
	if !atStart {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return append(out, p...)
		}
		out = append(out, p[:i+1]...)
		p = p[i+1:]
	}
	// Room for ~100-byte lines: growing once beats growing in steps.
	if need := len(out) + len(p) + (len(p)/64+1)*len(pre); need > cap(out) {
		out = append(make([]byte, 0, need), out...)
	}
	for len(p) > 0 {
		out = append(out, pre...)
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return append(out, p...)
		}
		out = append(out, p[:i+1]...)
		p = p[i+1:]
	}
	return out
}

// appendJSONLines appends one JSON object per line of p.
func appendJSONLines(out, ts, head, p []byte, partial bool) []byte {
	for len(p) > 0 {
		line, rest, ended := bytes.Cut(p, newline)
		out = append(out, `{"time":"`...)
		out = append(out, ts...)
		out = append(out, head...)
		out = appendJSONString(out, line)
		if !ended && partial {
			out = append(out, `","partial":true}`+"\n"...)
		} else {
			out = append(out, `"}`+"\n"...)
		}
		p = rest
	}
	return out
}

// appendXMLLines appends one element per line of p, as mpirun's --xml:
// <stdout rank="0">text&#010;</stdout>; a piece without its newline is an
// element of its own, on its own line (mpirun runs the next one on).
func appendXMLLines(out, head, end, p []byte) []byte {
	for len(p) > 0 {
		line, rest, ended := bytes.Cut(p, newline)
		out = append(out, head...)
		out = appendXMLText(out, line)
		if ended {
			out = append(out, "&#010;"...)
		}
		out = append(out, end...)
		p = rest
	}
	return out
}

// appendXMLText escapes s for XML character data as mpirun does: &, < and
// > and the control bytes as references (&#009;), the rest as it is.
func appendXMLText(out, s []byte) []byte {
	for _, c := range s {
		switch {
		case c == '&':
			out = append(out, "&amp;"...)
		case c == '<':
			out = append(out, "&lt;"...)
		case c == '>':
			out = append(out, "&gt;"...)
		case c < 0x20 || c == 0x7f:
			out = append(out, '&', '#', '0'+c/100, '0'+c/10%10, '0'+c%10, ';')
		default:
			out = append(out, c)
		}
	}
	return out
}

const hexDigits = "0123456789abcdef"

// jsonPlain marks the bytes a JSON string holds as they are.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

// appendJSONString appends s as the inside of a JSON string. Valid UTF-8
// passes as it is (but U+2028 and U+2029, escaped for JavaScript); every
// byte of an invalid sequence becomes \u00XX.
func appendJSONString(out, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonPlain[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				out = append(out, s[start:i]...)
				out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			case r == '\u2028' || r == '\u2029':
				out = append(out, s[start:i]...)
				out = append(out, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(out, s[start:]...)
}
