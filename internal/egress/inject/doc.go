// Package inject is the credential side of hutchd's egress proxy: it resolves the
// "${secrets.NAME}" templates of header rules, makes and recognises placeholders (random
// per sandbox and secret, with the fixed marker "hutchph_"), swaps them for real values only in
// the locations and towards the hosts their secret is bound to, detects placeholders sent
// to any other host (violations; towards a bound host outside the swap scope a placeholder is
// sent unchanged and reported with action pass), and redacts real secret values out of responses (raw,
// base64 at every alignment and URL-encoded forms, whole or as any run of at least MinRun
// bytes, streamed with a bounded carry-over across writes), and masks placeholders in audited
// strings (MaskPlaceholders).
//
// It holds no secret at rest: values come from internal/secret at request time.
package inject
