package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text the CLI shows versus data the user asked for.
//
// A sandbox controls much of what hutch prints: file names (ls, watch), process IDs, commands
// and states (ps, kill, start's ready line), branch names, error messages that quote paths, a
// terminal's or port's name, a sandbox's last error. Printed raw, an ESC, OSC or CR in them
// reaches the operator's terminal: it can retitle it, rewrite what was printed before, hide a
// line, or inject input on some terminals. Every such print goes through Printable.
//
// Streams the user asked for stay byte for byte: exec's and run's stdout and stderr, cat and
// read file content, process logs, the shell's terminal, an image build's log, and JSON output
// (--json: encoding/json escapes control characters itself). Redirected to a file they must be
// the sandbox's bytes, and a user who prints them to a terminal asked for that.

// Printable returns s with every byte or rune a terminal could act on made visible: C0 controls
// (tab, newline and CR included), DEL and bytes that are not UTF-8 as \xNN; C1 controls and
// other invisible runes that are not printable (bidirectional overrides, zero-width and line
// separators) as \uNNNN; a backslash as \\, so that the escaped form is unambiguous. Printable
// UTF-8 text (any script, emoji) and the ASCII space are kept as they are.
func Printable(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == '\\':
			b.WriteString(`\\`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// plain reports whether s is printable ASCII without a backslash (the usual case: no copy).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
