// Package secret keeps hutchd's secrets: named credential values that sandboxes may use
// through egress rules but never read. Values are sealed with AES-256-GCM under a host master
// key (<state>/keys/master.key, 32 random bytes, mode 0600, made on first use) before they
// reach the SQLite store, so the database file, its backups and its WAL hold only ciphertext.
// The same Box seals other host-only key material (the per-sandbox egress CA keys).
//
// Values are never logged, never returned by the API and never written anywhere else; callers
// that need a value (the egress proxy, at request time) call Store.Value.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the master key's length in bytes (AES-256).
const KeySize = 32

// Box seals and opens small values with AES-256-GCM. It is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// NewBox returns a Box for a 32-byte key.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret: master key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	return &Box{aead: aead}, nil
}

// LoadOrCreateKey opens the master key file at path (creating its directory 0700 and the file
// 0600 with fresh random bytes when it does not exist) and returns a Box for it. A file of the
// wrong size, or readable by group or others, is an error: the key is never silently replaced.
func LoadOrCreateKey(path string) (*Box, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secret: key dir: %w", err)
	}
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			// Another process made it first: use theirs.
			return LoadOrCreateKey(path)
		}
		if err != nil {
			return nil, fmt.Errorf("secret: create master key: %w", err)
		}
		_, werr := f.Write(key)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("secret: write master key: %w", err)
		}
		return NewBox(key)
	}
	if err != nil {
		return nil, fmt.Errorf("secret: read master key: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret: master key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret: master key %s has mode %v: want 0600", path, st.Mode().Perm())
	}
	return NewBox(key)
}

// Seal encrypts plaintext bound to ad (associated data, e.g. "secret:NAME", which Open must
// repeat) and returns nonce‖ciphertext‖tag.
func (b *Box) Seal(plaintext, ad []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	return b.aead.Seal(nonce, nonce, plaintext, ad)
}

// ErrOpen is returned by Open for a value that was not sealed by this key with this ad.
var ErrOpen = errors.New("secret: cannot open sealed value (wrong master key or tampered data)")

// Open decrypts a value made by Seal with the same ad.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	ns := b.aead.NonceSize()
	if len(sealed) < ns+b.aead.Overhead() {
		return nil, ErrOpen
	}
	out, err := b.aead.Open(nil, sealed[:ns], sealed[ns:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
