// Package shellwords quotes and splits command lines as a POSIX shell does,
// without any expansion: for remote commands (rsh) and for files that hold
// command lines (cli's application files).
package shellwords

import (
	"errors"
	"strings"
)

// Quote makes s one word for a POSIX shell: unchanged when it only holds
// characters no shell treats specially, otherwise in single quotes (a single
// quote inside becomes '\”).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_-./:@%+,", c) >= 0:
		case c == '=' && i > 0: // a leading = expands to a command path in zsh
		default:
			safe = false
		}
		if !safe {
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join is argv as one command line, each word quoted as needed.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Split cuts a command line into words the way a POSIX shell would, without
// any expansion: blanks separate words; a backslash keeps the next character
// (and drops a newline); single quotes keep everything up to the next single
// quote; double quotes keep everything, a backslash there escaping only
// $ ` " \ and newline. Adjacent quoted and unquoted parts make one word. A
// '#' that starts a word starts a comment, up to the end of the line.
func Split(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word (possibly an empty one, from '' or "")
	)
	end := func() {
		if in {
			words = append(words, cur.String())
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n':
			end()
		case '#':
			if in {
				cur.WriteByte(c)
				continue
			}
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j // the newline ends the comment and, next, the word
				continue
			}
			return words, nil
		case '\\':
			if i+1 >= len(s) {
				return nil, errors.New("command ends with a backslash")
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				in = true
			}
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			in = true
			i += j + 1
		case '"':
			in = true
			closed := false
			for i++; i < len(s); i++ {
				c := s[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] != '\n' {
						cur.WriteByte(s[i])
					}
					continue
				}
				cur.WriteByte(c)
			}
			if !closed {
				return nil, errors.New("unterminated double quote")
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	end()
	return words, nil
}
