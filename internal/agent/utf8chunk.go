package agent

import (
	"encoding/base64"
	"unicode/utf8"
)

// chunk is one piece of output ready for the wire.
type chunk struct {
	data   string
	base64 bool
}

// utf8Chunker turns a byte stream into wire chunks that never split a UTF-8 character: an
// incomplete sequence at the end of a piece waits for the next one. A piece that is not valid
// UTF-8 is sent base64. The zero value is ready.
type utf8Chunker struct {
	pending []byte
}

// push adds p and returns the chunk to send, if any.
func (c *utf8Chunker) push(p []byte) (chunk, bool) {
	data := append(c.pending, p...)
	cut := len(data) - incompleteTail(data)
	head := data[:cut]
	c.pending = append([]byte(nil), data[cut:]...)
	if len(head) == 0 {
		return chunk{}, false
	}
	return encode(head), true
}

// flush returns what is still held back, sent base64 since it is not a whole character.
func (c *utf8Chunker) flush() (chunk, bool) {
	if len(c.pending) == 0 {
		return chunk{}, false
	}
	ch := encode(c.pending)
	c.pending = nil
	return ch, true
}

func encode(b []byte) chunk {
	if utf8.Valid(b) {
		return chunk{data: string(b)}
	}
	return chunk{data: base64.StdEncoding.EncodeToString(b), base64: true}
}

// incompleteTail returns the length of a trailing incomplete (but so far valid) UTF-8
// sequence in b, 0 if b ends with a whole character or invalid bytes.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}
