package session

import (
	"bytes"
	"strings"
)

// parseExports parses the output of bash's `declare -px`: one
// `declare -FLAGS NAME[=VALUE]` line per exported variable, where VALUE is bash-quoted ("…"
// with \" \$ \` \\ escapes, or $'…' ANSI-C quoting, or for arrays ([KEY]=VALUE …)). It returns
// the variables that have a value, as a child process sees them (an array contributes its
// element "0", like ${NAME}); ok is false when the text is not in that form.
func parseExports(b []byte) (env map[string]string, ok bool) {
	env = make(map[string]string, bytes.Count(b, []byte("\ndeclare -"))+1)
	p := declParser{b: b}
	for !p.eof() {
		if !p.skip("declare -") {
			return nil, false
		}
		flags := p.until(' ')
		if !p.skip(" ") {
			return nil, false
		}
		name := p.untilAny("=\n")
		if name == "" {
			return nil, false
		}
		if p.skip("\n") {
			continue // exported but unset: not in a child's environment
		}
		if !p.skip("=") {
			return nil, false
		}
		if strings.ContainsAny(flags, "aA") {
			v, has, ok := p.array()
			if !ok {
				return nil, false
			}
			if has {
				env[name] = v
			}
		} else {
			v, ok := p.word(func(c byte) bool { return c == '\n' })
			if !ok {
				return nil, false
			}
			env[name] = v
		}
		if !p.skip("\n") {
			return nil, false
		}
	}
	return env, true
}

// declParser reads `declare -p` output.
type declParser struct {
	b []byte
	i int
}

func (p *declParser) eof() bool { return p.i >= len(p.b) }

// skip consumes s if the input continues with it.
func (p *declParser) skip(s string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

// until consumes and returns everything up to (not including) c or the end.
func (p *declParser) until(c byte) string {
	return p.untilAny(string(c))
}

// untilAny consumes and returns everything up to (not including) any byte of set or the end.
func (p *declParser) untilAny(set string) string {
	j := bytes.IndexAny(p.b[p.i:], set)
	if j < 0 {
		j = len(p.b) - p.i
	}
	s := string(p.b[p.i : p.i+j])
	p.i += j
	return s
}

// array parses `([KEY]=VALUE ...)` and returns the value of key "0".
func (p *declParser) array() (v string, has, ok bool) {
	if !p.skip("(") {
		return "", false, false
	}
	for {
		for p.skip(" ") {
		}
		if p.skip(")") {
			return v, has, true
		}
		if !p.skip("[") {
			return "", false, false
		}
		key, ok := p.word(func(c byte) bool { return c == ']' })
		if !ok || !p.skip("]=") {
			return "", false, false
		}
		val, ok := p.word(func(c byte) bool { return c == ' ' || c == ')' })
		if !ok {
			return "", false, false
		}
		if key == "0" {
			v, has = val, true
		}
	}
}

// word parses one shell word made of bare characters, "…" and $'…' parts, up to a byte for
// which stop is true (outside quotes) or the end of the input.
func (p *declParser) word(stop func(byte) bool) (string, bool) {
	var out []byte
	for !p.eof() {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !p.doubleQuoted(&out) {
				return "", false
			}
		case c == '$' && p.i+1 < len(p.b) && p.b[p.i+1] == '\'':
			p.i += 2
			if !p.ansiC(&out) {
				return "", false
			}
		case stop(c):
			return string(out), true
		default:
			out = append(out, c)
			p.i++
		}
	}
	return string(out), true
}

// doubleQuoted appends the text of a "…" string (the opening quote is consumed) to out.
func (p *declParser) doubleQuoted(out *[]byte) bool {
	for !p.eof() {
		c := p.b[p.i]
		p.i++
		switch c {
		case '"':
			return true
		case '\\':
			if !p.eof() && strings.IndexByte("\"$`\\\n", p.b[p.i]) >= 0 {
				c = p.b[p.i]
				p.i++
			}
		}
		*out = append(*out, c)
	}
	return false
}

// ansiCEscapes maps the one-letter escapes of $'…' to their bytes.
var ansiCEscapes = map[byte]byte{
	'a': 7, 'b': 8, 'e': 27, 'E': 27, 'f': 12, 'n': '\n', 'r': '\r', 't': '\t', 'v': 11,
	'\\': '\\', '\'': '\'', '"': '"', '?': '?',
}

// ansiC appends the text of a $'…' string (the opening $' is consumed) to out.
func (p *declParser) ansiC(out *[]byte) bool {
	for !p.eof() {
		c := p.b[p.i]
		p.i++
		if c == '\'' {
			return true
		}
		if c != '\\' || p.eof() {
			*out = append(*out, c)
			continue
		}
		e := p.b[p.i]
		p.i++
		switch {
		case ansiCEscapes[e] != 0:
			*out = append(*out, ansiCEscapes[e])
		case e >= '0' && e <= '7':
			n := int(e - '0')
			for k := 0; k < 2 && !p.eof() && p.b[p.i] >= '0' && p.b[p.i] <= '7'; k++ {
				n = n*8 + int(p.b[p.i]-'0')
				p.i++
			}
			*out = append(*out, byte(n))
		case e == 'x':
			n, digits := 0, 0
			for ; digits < 2 && !p.eof() && isHex(p.b[p.i]); digits++ {
				n = n*16 + hexVal(p.b[p.i])
				p.i++
			}
			if digits == 0 {
				*out = append(*out, '\\', 'x')
			} else {
				*out = append(*out, byte(n))
			}
		default:
			*out = append(*out, '\\', e)
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}
