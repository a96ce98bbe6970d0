package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReadText(t *testing.T) {
	a := startAgent(t)
	out := a.mustPost("/api/write", obj{"path": "dir/a/hello.txt", "content": "héllo\n"})
	want := filepath.Join(a.workdir, "dir/a/hello.txt")
	if out["path"] != want || out["size"] != 7.0 {
		t.Fatalf("write = %v", out)
	}
	out = a.mustPost("/api/read", obj{"path": want})
	if out["content"] != "héllo\n" || out["encoding"] != "utf-8" || out["isBinary"] != false ||
		out["mimeType"] != "text/plain" || out["size"] != 7.0 {
		t.Fatalf("read = %v", out)
	}
	out = a.mustPost("/api/read", obj{"path": want, "encoding": "base64"})
	if out["content"] != base64.StdEncoding.EncodeToString([]byte("héllo\n")) || out["encoding"] != "base64" {
		t.Fatalf("read base64 = %v", out)
	}
	// Overwrite keeps the mode and leaves no temp file.
	if err := os.Chmod(want, 0o755); err != nil {
		t.Fatal(err)
	}
	a.mustPost("/api/write", obj{"path": want, "content": "x"})
	fi, err := os.Stat(want)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after overwrite = %v, %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(want))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries; want only the file", len(entries))
	}
}

func TestWriteReadBinaryAndMIME(t *testing.T) {
	a := startAgent(t)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2}, 100)...)
	a.mustPost("/api/write", obj{"path": "img.dat", "content": base64.StdEncoding.EncodeToString(png), "encoding": "base64"})
	out := a.mustPost("/api/read", obj{"path": "img.dat"})
	if out["mimeType"] != "image/png" || out["isBinary"] != true || out["encoding"] != "base64" ||
		out["content"] != base64.StdEncoding.EncodeToString(png) {
		t.Fatalf("read png = %v", out)
	}
	tests := []struct{ name, content, mime string }{
		{"a.json", `{"a":1}`, "application/json"},
		{"a.py", "print(1)\n", "text/x-python"},
		{"a.js", "let a\n", "text/javascript"},
		{"noext", "plain words\n", "text/plain"},
		{"empty.x", "", "inode/x-empty"},
	}
	for _, tt := range tests {
		a.mustPost("/api/write", obj{"path": tt.name, "content": tt.content})
		out := a.mustPost("/api/read", obj{"path": tt.name})
		if out["mimeType"] != tt.mime || out["isBinary"] != false || out["content"] != tt.content {
			t.Errorf("read %s = %v; want %s text", tt.name, out, tt.mime)
		}
	}
	status, eout := a.post("/api/write", obj{"path": "x", "content": "!!!", "encoding": "base64"})
	wantError(t, status, eout, 400, "VALIDATION_FAILED")
}

func TestFileErrors(t *testing.T) {
	a := startAgent(t)
	if err := os.MkdirAll(filepath.Join(a.workdir, "d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(a.workdir, "big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 33<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		body   obj
		status int
		code   string
	}{
		{"read missing", "/api/read", obj{"path": "nope"}, 404, "FILE_NOT_FOUND"},
		{"read dir", "/api/read", obj{"path": "d"}, 400, "IS_DIRECTORY"},
		{"read 33 MiB", "/api/read", obj{"path": "big"}, 413, "FILE_TOO_LARGE"},
		{"NUL in path", "/api/read", obj{"path": "a\x00b"}, 400, "INVALID_PATH"},
		{"empty path", "/api/write", obj{"path": "", "content": "x"}, 400, "INVALID_PATH"},
		{"long path", "/api/exists", obj{"path": strings.Repeat("a", 4097)}, 400, "INVALID_PATH"},
		{"long name", "/api/write", obj{"path": strings.Repeat("n", 300), "content": "x"}, 400, "NAME_TOO_LONG"},
		{"write onto dir", "/api/write", obj{"path": "d", "content": "x"}, 400, "IS_DIRECTORY"},
		{"write under file", "/api/write", obj{"path": "big/x", "content": "x"}, 400, "NOT_DIRECTORY"},
		{"delete dir", "/api/delete", obj{"path": "d"}, 400, "IS_DIRECTORY"},
		{"delete missing", "/api/delete", obj{"path": "nope"}, 404, "FILE_NOT_FOUND"},
		{"mkdir exists", "/api/mkdir", obj{"path": "d"}, 409, "FILE_EXISTS"},
		{"mkdir no parent", "/api/mkdir", obj{"path": "x/y/z"}, 404, "FILE_NOT_FOUND"},
		{"list a file", "/api/list-files", obj{"path": "big"}, 400, "NOT_DIRECTORY"},
		{"list missing", "/api/list-files", obj{"path": "nope"}, 404, "FILE_NOT_FOUND"},
		{"rename missing", "/api/rename", obj{"oldPath": "nope", "newPath": "x"}, 404, "FILE_NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := a.post(tt.path, tt.body)
			wantError(t, status, out, tt.status, tt.code)
			if ctx, ok := out["context"].(obj); !ok || ctx["path"] == nil {
				t.Errorf("context = %v; want a path", out["context"])
			}
		})
	}
	// A rename onto a non-empty directory: Linux says EEXIST (or ENOTEMPTY).
	if err := os.MkdirAll(filepath.Join(a.workdir, "full/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(a.workdir, "src/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	status, out := a.post("/api/rename", obj{"oldPath": "src/x", "newPath": "full"})
	if status != 409 || (out["code"] != "FILE_EXISTS" && out["code"] != "DIRECTORY_NOT_EMPTY") {
		t.Fatalf("rename onto non-empty dir = %d %v", status, out)
	}
}

func TestFileOps(t *testing.T) {
	a := startAgent(t)
	a.mustPost("/api/mkdir", obj{"path": "p/q/r", "recursive": true})
	a.mustPost("/api/mkdir", obj{"path": "p/q/r", "recursive": true}) // idempotent
	a.mustPost("/api/write", obj{"path": "p/f.txt", "content": "f"})
	a.mustPost("/api/write", obj{"path": "p/.hidden", "content": "h"})
	a.mustPost("/api/write", obj{"path": "p/q/g.sh", "content": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(a.workdir, "p/q/g.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.txt", filepath.Join(a.workdir, "p/link")); err != nil {
		t.Fatal(err)
	}

	names := func(out obj) string {
		var n []string
		for _, f := range out["files"].([]any) {
			n = append(n, f.(obj)["relativePath"].(string)+":"+f.(obj)["type"].(string))
		}
		return strings.Join(n, ",")
	}
	out := a.mustPost("/api/list-files", obj{"path": "p"})
	if got := names(out); got != "f.txt:file,link:symlink,q:directory" || out["count"] != 3.0 {
		t.Fatalf("list = %s (%v)", got, out["count"])
	}
	out = a.mustPost("/api/list-files", obj{"path": "p", "options": obj{"recursive": true, "includeHidden": true}})
	if got := names(out); got != ".hidden:file,f.txt:file,link:symlink,q:directory,q/g.sh:file,q/r:directory" {
		t.Fatalf("recursive list = %s", got)
	}
	for _, f := range out["files"].([]any) {
		fi := f.(obj)
		if fi["name"] == "g.sh" {
			perms := fi["permissions"].(obj)
			if fi["mode"] != "rwxr-xr-x" || fi["size"] != 10.0 || perms["executable"] != true || perms["readable"] != true ||
				fi["absolutePath"] != filepath.Join(a.workdir, "p/q/g.sh") || fi["modifiedAt"] == nil {
				t.Fatalf("g.sh info = %v", fi)
			}
		}
	}

	if out := a.mustPost("/api/exists", obj{"path": "p/f.txt"}); out["exists"] != true {
		t.Fatalf("exists = %v", out)
	}
	if out := a.mustPost("/api/exists", obj{"path": "p/nope"}); out["exists"] != false {
		t.Fatalf("exists missing = %v", out)
	}
	if out := a.mustPost("/api/exists", obj{"path": "p/f.txt/under"}); out["exists"] != false {
		t.Fatalf("exists under file = %v", out)
	}

	out = a.mustPost("/api/rename", obj{"oldPath": "p/f.txt", "newPath": "p/g.txt"})
	if out["newPath"] != filepath.Join(a.workdir, "p/g.txt") {
		t.Fatalf("rename = %v", out)
	}
	out = a.mustPost("/api/move", obj{"sourcePath": "p/g.txt", "destinationPath": "p/q"})
	if out["newPath"] != filepath.Join(a.workdir, "p/q/g.txt") {
		t.Fatalf("move into dir = %v", out)
	}
	// Across file systems (/dev/shm is a tmpfs) when available.
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "hutch-test")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			a.mustPost("/api/move", obj{"sourcePath": "p/q", "destinationPath": filepath.Join(shm, "moved")})
			if b, err := os.ReadFile(filepath.Join(shm, "moved/g.txt")); err != nil || string(b) != "f" {
				t.Fatalf("cross-device move: %v %q", err, b)
			}
			if _, err := os.Stat(filepath.Join(a.workdir, "p/q")); err == nil {
				t.Fatal("cross-device move left the source")
			}
		}
	}

	status, eout := a.post("/api/delete", obj{"path": "p"})
	wantError(t, status, eout, 400, "IS_DIRECTORY")
	a.mustPost("/api/delete", obj{"path": "p/link"})
	if _, err := os.Stat(filepath.Join(a.workdir, "p/.hidden")); err != nil {
		t.Fatal("deleting a symlink touched something else")
	}
	a.mustPost("/api/delete", obj{"path": "p", "recursive": true})
	if _, err := os.Stat(filepath.Join(a.workdir, "p")); err == nil {
		t.Fatal("recursive delete left the directory")
	}
}

func TestRelativePathsFollowSessionCwd(t *testing.T) {
	a := startAgent(t)
	a.exec(obj{"command": "mkdir -p deep && cd deep", "sessionId": "s"})
	out := a.mustPost("/api/write", obj{"path": "here.txt", "content": "x", "sessionId": "s"})
	if out["path"] != filepath.Join(a.workdir, "deep/here.txt") {
		t.Fatalf("relative write went to %v", out["path"])
	}
	out = a.mustPost("/api/write", obj{"path": "here.txt", "content": "x"})
	if out["path"] != filepath.Join(a.workdir, "here.txt") {
		t.Fatalf("default session write went to %v", out["path"])
	}
}

// largeReader yields n deterministic pseudo-random bytes without holding them in memory.
type largeReader struct {
	rng *rand.ChaCha8
	n   int64
}

func (r *largeReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, _ := r.rng.Read(p)
	r.n -= int64(n)
	return n, nil
}

func TestRawFilesLarge(t *testing.T) {
	a := startAgent(t)
	const size = 100 << 20
	src := &largeReader{rng: rand.NewChaCha8([32]byte{7}), n: size}
	h := sha256.New()
	target := "/api/files?path=" + url.QueryEscape("big dir/blob.bin")
	req, _ := http.NewRequest(http.MethodPut, "http://agent"+target, io.TeeReader(src, h))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), fmt.Sprintf(`"size":%d`, size)) {
		t.Fatalf("PUT = %d %s", resp.StatusCode, b)
	}
	wantSum := h.Sum(nil)

	resp, err = a.client.Get("http://agent" + target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != size || resp.Header.Get("X-Hutch-Binary") != "true" ||
		resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("GET = %d len %d headers %v", resp.StatusCode, resp.ContentLength, resp.Header)
	}
	h2 := sha256.New()
	n, err := io.Copy(h2, resp.Body)
	if err != nil || n != size || !bytes.Equal(h2.Sum(nil), wantSum) {
		t.Fatalf("GET body: %d bytes, err %v, sha256 equal %v", n, err, bytes.Equal(h2.Sum(nil), wantSum))
	}

	resp2, err := a.client.Get("http://agent/api/files?path=nope")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 404 {
		t.Fatalf("GET missing = %d", resp2.StatusCode)
	}
	// A text file reports itself as such.
	a.mustPost("/api/write", obj{"path": "t.md", "content": "# hi\n"})
	resp3, err := a.client.Get("http://agent/api/files?path=t.md")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp3.Body)
	resp3.Body.Close()
	if string(body) != "# hi\n" || resp3.Header.Get("X-Hutch-Binary") != "false" || resp3.Header.Get("Content-Type") != "text/markdown" {
		t.Fatalf("GET text = %q %v", body, resp3.Header)
	}
}

func TestReadStream(t *testing.T) {
	a := startAgent(t)
	text := strings.Repeat("ab€", 50_000) // 250 kB, several chunks, € straddles edges
	a.mustPost("/api/write", obj{"path": "s.txt", "content": text})
	evs := a.stream("/api/read/stream", obj{"path": "s.txt"})
	if evs[0]["type"] != "metadata" || evs[0]["mimeType"] != "text/plain" || evs[0]["isBinary"] != false ||
		evs[0]["encoding"] != "utf-8" || evs[0]["size"] != float64(len(text)) {
		t.Fatalf("metadata = %v", evs[0])
	}
	var sb strings.Builder
	for _, ev := range evs[1 : len(evs)-1] {
		if ev["type"] != "chunk" || ev["encoding"] != nil {
			t.Fatalf("event = %v", ev)
		}
		if len(ev["data"].(string)) > 65535 {
			t.Fatalf("chunk of %d bytes", len(ev["data"].(string)))
		}
		sb.WriteString(ev["data"].(string))
	}
	if sb.String() != text || evs[len(evs)-1]["type"] != "complete" || evs[len(evs)-1]["bytesRead"] != float64(len(text)) {
		t.Fatalf("stream reassembly failed; last = %v", evs[len(evs)-1])
	}

	bin := make([]byte, 200_000)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	bin[0] = 0
	if err := os.WriteFile(filepath.Join(a.workdir, "b.bin"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	evs = a.stream("/api/read/stream", obj{"path": "b.bin"})
	if evs[0]["isBinary"] != true || evs[0]["encoding"] != "base64" {
		t.Fatalf("metadata = %v", evs[0])
	}
	var got []byte
	for _, ev := range evs[1 : len(evs)-1] {
		b, err := base64.StdEncoding.DecodeString(ev["data"].(string))
		if err != nil || len(b) > 65535 {
			t.Fatalf("chunk: %v, %d bytes", err, len(b))
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, bin) {
		t.Fatal("binary stream differs")
	}
	status, out := a.post("/api/read/stream", obj{"path": "missing"})
	wantError(t, status, out, 404, "FILE_NOT_FOUND")
}
