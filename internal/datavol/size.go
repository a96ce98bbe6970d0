package datavol

import (
	"math"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// unitShift maps each accepted unit spelling (upper case) to its power of two.
var unitShift = func() map[string]int {
	m := map[string]int{"": 0, "B": 0}
	for i, u := range []string{"K", "M", "G", "T", "P"} {
		for _, suffix := range []string{"", "B", "I", "IB"} {
			m[u+suffix] = 10 * (i + 1)
		}
	}
	return m
}()

// ParseSize parses a size in bytes: a whole number, optionally followed by a binary unit
// K, M, G, T or P (powers of 1024, also for "GB"), which may be followed by "B", "i" or "iB",
// in either case: "16G", "512M", "1T", "16GiB", "16Gi", "4096", "4096B". Spaces around the text are ignored, not
// between number and unit. An empty string, a sign, a fraction, an unknown unit or a result
// above math.MaxInt64 is an InvalidArgument error.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: size %q: want a whole number of bytes with an optional K, M, G, T or P", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: size %q is too large", s)
	}
	shift, ok := unitShift[strings.ToUpper(t[i:])]
	if !ok {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: size %q has an unknown unit (want K, M, G, T or P)", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: size %q is too large", s)
	}
	return n << shift, nil
}
