package cli

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "main.go", "main.go"},
		{"space kept", "my file.txt", "my file.txt"},
		{"UTF-8 text kept", "résumé 日本語 🦀", "résumé 日本語 🦀"},
		{"ESC", "a\x1b[31mred", `a\x1b[31mred`},
		{"OSC title", "\x1b]0;pwned\x07x", `\x1b]0;pwned\x07x`},
		{"CR", "evil\rgood", `evil\x0dgood`},
		{"newline and tab", "a\nb\tc", `a\x0ab\x09c`},
		{"NUL", "a\x00b", `a\x00b`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as UTF-8", "a\u009b31m", `a\u009b31m`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"8-bit CSI byte, not UTF-8", "a\x9b31m", `a\x9b31m`},
		{"invalid UTF-8", "\xff\xfe", `\xff\xfe`},
		{"bidi override", "txt\u202egpj.exe", `txt\u202egpj.exe`},
		{"zero-width space", "a\u200bb", `a\u200bb`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"backslash", `a\x1b`, `a\\x1b`},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Printable(tc.in); got != tc.want {
				t.Errorf("Printable(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}
