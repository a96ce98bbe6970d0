package session

import (
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseExports(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
		ok   bool
	}{
		{"", map[string]string{}, true},
		{`declare -x A="q\"u\$o\` + "`" + `t\\e"` + "\n", map[string]string{"A": "q\"u$o`t\\e"}, true},
		{`declare -x B=$'a\nb\t\E\001\377\'\\'` + "\n", map[string]string{"B": "a\nb\t\x1b\x01\xff'\\"}, true},
		{`declare -x C=""` + "\ndeclare -x D\n" + `declare -ix I="5"` + "\n", map[string]string{"C": "", "I": "5"}, true},
		{`declare -x H="é€😀"` + "\n", map[string]string{"H": "é€😀"}, true},
		{`declare -ax ARR=([0]="x" [1]="y")` + "\n" + `declare -ax E=()` + "\n", map[string]string{"ARR": "x"}, true},
		{`declare -Ax AS=([$'q\n']="2" [0]="zero" ["a b"]="1" )` + "\n", map[string]string{"AS": "zero"}, true},
		{`declare -Ax AS2=(["a b"]="1" )` + "\n", map[string]string{}, true},
		{`declare -x A="unterminated` + "\n", nil, false},
		{`declare -x A=$'unterminated` + "\n", nil, false},
		{`export A="1"` + "\n", nil, false},
		{`declare -x A="1"`, nil, false},
	}
	for _, tt := range tests {
		got, ok := parseExports([]byte(tt.in))
		if ok != tt.ok || (ok && !maps.Equal(got, tt.want)) {
			t.Errorf("parseExports(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestParseExportsRoundTrip gives real bash random values (every byte but NUL) in its
// environment, in a C and a UTF-8 locale, and parses what its `declare -px` prints.
func TestParseExportsRoundTrip(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, locale := range []string{"C", "C.UTF-8"} {
		for round := range 20 {
			want := map[string]string{}
			env := []string{"LC_ALL=" + locale, "PATH=" + os.Getenv("PATH")}
			for i := range 40 {
				b := make([]byte, rng.IntN(40))
				for j := range b {
					switch rng.IntN(3) {
					case 0:
						b[j] = byte(1 + rng.IntN(255))
					case 1:
						const special = "\"$`\\'\n\t ()[]=é"
						b[j] = special[rng.IntN(len(special))]
					default:
						b[j] = byte('a' + rng.IntN(26))
					}
				}
				if i%5 == 0 {
					b = []byte(strings.Repeat("é€😀", rng.IntN(3)) + string(b))
				}
				k := "V" + string(rune('A'+i%26)) + strings.Repeat("x", i/26)
				want[k] = string(b)
				env = append(env, k+"="+string(b))
			}
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "builtin declare -px")
			cmd.Env = env
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := parseExports(out)
			if !ok {
				t.Fatalf("%s round %d: cannot parse %q", locale, round, out)
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("%s round %d: %s = %q; want %q (declare: %q)", locale, round, k, got[k], v, out)
				}
			}
		}
	}
}
