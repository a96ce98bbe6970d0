package inject

import (
	"bytes"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

const partialSecret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL" // 26 characters, MinRun 9

// streamed redacts text through a Reader fed in the given chunks.
func streamed(r *Redactor, chunks ...string) (string, int) {
	cs := make([][]byte, len(chunks))
	for i, c := range chunks {
		cs[i] = []byte(c)
	}
	rr := r.Reader(&chunkReader{chunks: cs})
	out, err := io.ReadAll(iotest.OneByteReader(rr))
	if err != nil {
		return "read error: " + err.Error(), 0
	}
	return string(out), rr.Count()
}

// leaks returns a run of out that is at least minRun bytes of some pair's Find (or, for a Whole
// pair, the whole Find), found by brute force; "" when none.
func leaks(pairs []Pair, out string) string {
	for _, p := range pairs {
		f := string(p.Find)
		need := MinRun(len(f))
		if p.Whole {
			need = len(f)
		}
		for a := 0; a+need <= len(f); a++ {
			if strings.Contains(out, f[a:a+need]) {
				return f[a : a+need]
			}
		}
	}
	return ""
}

// TestRedactorPartialReflections is issue 7 finding 2: a partial reflection of a secret (25 of
// 26 characters, a prefix and a suffix in two responses, a truncated token inside an error
// message) is redacted, in every form, at every split of the stream; runs shorter than MinRun
// pass.
func TestRedactorPartialReflections(t *testing.T) {
	pairs := Forms([]byte(partialSecret), []byte("[redacted:TOK]"))
	r := NewRedactor(pairs)
	L := MinRun(len(partialSecret))
	if L != 9 {
		t.Fatalf("MinRun(26) = %d", L)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(partialSecret))
	for _, tc := range []struct {
		name, text, want string
	}{
		{"first 25 of 26", "key=" + partialSecret[:25] + ";", "key=[redacted:TOK];"},
		{"last 25 of 26", "key=" + partialSecret[1:] + ";", "key=[redacted:TOK];"},
		{"prefix of MinRun", "a" + partialSecret[:L] + "z", "a[redacted:TOK]z"},
		{"suffix of MinRun", "a" + partialSecret[len(partialSecret)-L:] + "z", "a[redacted:TOK]z"},
		{"middle of MinRun", "a" + partialSecret[8:8+L] + "z", "a[redacted:TOK]z"},
		{"shorter than MinRun passes", "a" + partialSecret[:L-1] + "z" + partialSecret[len(partialSecret)-L+1:], "a" + partialSecret[:L-1] + "z" + partialSecret[len(partialSecret)-L+1:]},
		{"truncated token in an error message", `{"error":"invalid key ` + partialSecret[:14] + `..., check your settings"}`, `{"error":"invalid key [redacted:TOK]..., check your settings"}`},
		{"truncated base64", "auth " + b64[:20] + " end", "auth [redacted:TOK] end"},
		{"partial at the very end", "tail " + partialSecret[:12], "tail [redacted:TOK]"},
		{"partial at the very start", partialSecret[14:] + " head", "[redacted:TOK] head"},
		{"two partials back to back", partialSecret[:13] + partialSecret[13:], "[redacted:TOK]"},
		{"whole then partial", partialSecret + "," + partialSecret[3:20], "[redacted:TOK],[redacted:TOK]"},
	} {
		if got, _ := r.String(tc.text); got != tc.want {
			t.Errorf("%s: String = %q, want %q", tc.name, got, tc.want)
		}
		for i := 0; i <= len(tc.text); i++ {
			for j := i; j <= len(tc.text); j += 5 {
				if got, _ := streamed(r, tc.text[:i], tc.text[i:j], tc.text[j:]); got != tc.want {
					t.Fatalf("%s: split %d/%d: %q, want %q", tc.name, i, j, got, tc.want)
				}
			}
		}
	}
	// Prefix then suffix in two responses: each is redacted on its own.
	for _, part := range []string{partialSecret[:13], partialSecret[13:]} {
		if got, n := r.String("v=" + part); got != "v=[redacted:TOK]" || n != 1 {
			t.Errorf("half %q: %q %d", part, got, n)
		}
	}
}

// TestRedactorRandomized checks, on random texts full of whole and partial forms of two
// secrets split at random points, that the stream equals the one-shot result and that no run
// of MinRun bytes of any form survives (checked by brute force).
func TestRedactorRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	secrets := []string{"s3cr3t+Value/with=chars", "ghp_0123456789abcdefghijABCDEFGHIJklmnopqr"}
	var pairs []Pair
	var forms []string
	for i, s := range secrets {
		ps := Forms([]byte(s), []byte("<R"+string(rune('0'+i))+">"))
		pairs = append(pairs, ps...)
		for _, p := range ps {
			forms = append(forms, string(p.Find))
		}
	}
	// A Whole pair with a public beginning, as a Basic credential.
	pairs = append(pairs, WholeForms([]byte("x-access-token:"+secrets[0]), []byte("<B>"))...)
	r := NewRedactor(pairs)
	filler := []string{" ", "\n", "error: ", "abc", "==", "%2F", "x-access-token:", "Bearer "}
	for iter := 0; iter < 3000; iter++ {
		var sb strings.Builder
		for range 1 + rng.IntN(6) {
			sb.WriteString(filler[rng.IntN(len(filler))])
			f := forms[rng.IntN(len(forms))]
			a := rng.IntN(len(f))
			z := a + rng.IntN(len(f)-a+1)
			if rng.IntN(3) == 0 {
				a, z = 0, len(f)
			}
			sb.WriteString(f[a:z])
		}
		text := sb.String()
		want, _ := r.String(text)
		if l := leaks(pairs, want); l != "" {
			t.Fatalf("String(%q) = %q still holds %q", text, want, l)
		}
		i := rng.IntN(len(text) + 1)
		j := i + rng.IntN(len(text)-i+1)
		if got, _ := streamed(r, text[:i], text[i:j], text[j:]); got != want {
			t.Fatalf("stream of %q split %d/%d = %q, String = %q", text, i, j, got, want)
		}
	}
}

// TestFormsShiftedBase64 is issue 7 finding 3: base64 of a token that does not start on a
// 3-byte boundary (base64("Bearer "+tok), base64("x"+tok)), in both alphabets, padded or not,
// followed by more data or not, is redacted even with whole-form matching only.
func TestFormsShiftedBase64(t *testing.T) {
	for _, tok := range []string{"tok_live_0123456789abcdefSECRET", "ab?>c~~~~d>>?e~~f", "short9char"} {
		whole := NewRedactor(WholeForms([]byte(tok), []byte("[R]")))
		partial := NewRedactor(Forms([]byte(tok), []byte("[R]")))
		for _, pre := range []string{"", "x", "xy", "Bearer ", "user:"} {
			for _, post := range []string{"", "!", "!?", "!?#"} {
				data := []byte(pre + tok + post)
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
					e := enc.EncodeToString(data)
					for name, r := range map[string]*Redactor{"whole": whole, "partial": partial} {
						out, n := r.String("h: " + e + " ;")
						if n == 0 || !strings.Contains(out, "[R]") {
							t.Errorf("%s %q: base64(%q+tok+%q) = %q not redacted: %q", name, tok, pre, post, e, out)
						}
						// What is left of the encoding is at most the unstable characters of
						// the neighbouring bytes' groups, never 4 characters of the token's.
						rest := strings.TrimSuffix(strings.TrimPrefix(out, "h: "), " ;")
						left, right, _ := strings.Cut(rest, "[R]")
						encPre := enc.EncodeToString([]byte(pre))
						if len(left) > len(encPre)+3 || len(right) > 8 {
							t.Errorf("%s: base64(%q+tok+%q): too much left around the redaction: %q", name, pre, post, out)
						}
					}
				}
			}
		}
	}
	// Forms of a short value stay whole-only-safe: no shifted form under 8 characters.
	for _, p := range Forms([]byte("abc"), []byte("X")) {
		if len(p.Find) < 3 {
			t.Errorf("form %q is shorter than the value", p.Find)
		}
	}
}

// TestRedactorHoldsOnlyWhatMayGrow: a stream is delayed only by a trailing run that more data
// may turn into a redaction; bytes no form holds flow at once.
func TestRedactorHoldsOnlyWhatMayGrow(t *testing.T) {
	r := NewRedactor(Forms([]byte(partialSecret), []byte("X")))
	pr, pw := io.Pipe()
	rr := r.Reader(pr)
	buf := make([]byte, 100)
	read := func(w string) string {
		go pw.Write([]byte(w))
		n, err := rr.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	if got := read("data: 1\n\n"); got != "data: 1\n\n" {
		t.Fatalf("unrelated bytes held: %q", got)
	}
	// A middle piece of the secret, shorter than MinRun, at the end of a write is held: the
	// next write may make it long enough.
	if got := read("x " + partialSecret[10:15]); got != "x " {
		t.Fatalf("partial run not held: %q", got)
	}
	if got := read(partialSecret[15:22] + "\n"); got != "X\n" {
		t.Fatalf("grown run: %q", got)
	}
	// The whole secret at the end of a write cannot grow any longer in the raw form, but its
	// URL-encoded forms are the same string: it is redacted at once.
	if got := read("y " + partialSecret); got != "y X" {
		t.Fatalf("complete form held: %q", got)
	}
	pw.Close()
	if rest, _ := io.ReadAll(rr); len(rest) != 0 {
		t.Fatalf("rest %q", rest)
	}
	if rr.Count() != 2 {
		t.Fatalf("count %d", rr.Count())
	}
}

// TestRedactorLongStreamBounded: a long stream of text made of form characters never
// accumulates in the redactor (the carry-over stays within twice the longest form).
func TestRedactorLongStreamBounded(t *testing.T) {
	r := NewRedactor(Forms([]byte(partialSecret), []byte("X")))
	// Repeats a 8-byte piece of the secret separated by a byte that breaks every run.
	piece := partialSecret[2:10] + "|"
	src := strings.Repeat(piece, 100000)
	rr := r.Reader(io.NopCloser(strings.NewReader(src)))
	buf := make([]byte, 4096)
	total := 0
	for {
		n, err := rr.Read(buf)
		total += n
		if len(rr.pending) > 2*r.maxLen+32<<10 {
			t.Fatalf("pending grew to %d", len(rr.pending))
		}
		if err != nil {
			break
		}
	}
	if total != len(src) || rr.Count() != 0 {
		t.Fatalf("total %d count %d", total, rr.Count())
	}
	_ = bytes.MinRead
	_ = url.QueryEscape
}
